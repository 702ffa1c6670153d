"""``fsdp-skill mcp``: the toolkit's functions as an MCP server over stdio.

Tools mirror the command line (same argument names, same JSON results): ``search``,
``show``, ``lint``, ``plan``, ``explain``, ``hang`` and ``env``. The skill's references are
served as resources (``fsdp://skill/SKILL.md``, ``fsdp://references/<file>``).

Every argument is bounded (text size, number of paths, ranges). No file outside the roots the
client declared (MCP roots) or those given with ``--root`` is read: the tools get the roots
and pass every path they open through ``Roots.admit`` (see ``fsdp_skill.roots``). A bad
argument or a failing tool comes back as a tool error, a malformed frame as a JSON-RPC error;
the server keeps running.
"""

# No ``from __future__ import annotations``: the SDK reads the tool signatures at runtime,
# and they name types local to build_server.
import functools
import inspect
import json
import re
import sys
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlparse
from urllib.request import url2pathname

from fsdp_skill import SKILL_NAME, __version__
from fsdp_skill.errors import UsageError
from fsdp_skill.roots import MAX_PATH, Roots

MAX_TEXT = 1_000_000
"""Characters of code or log text one call may send."""
MAX_QUERY = 1_000
MAX_ID = 300
MAX_LINT_PATHS = 100
MAX_HANG_PATHS = 1_024
MAX_CODES = 100
CODE_PATTERN = r"^[A-Za-z]+[0-9]*$"
RESOURCE_SCHEME = "fsdp"

INSTRUCTIONS = """\
Expert help for PyTorch FSDP / FSDP2 training. Start with `search` (ranked sections of the
skill's references) and `show` (one whole section). `lint` checks training code and Hugging
Face FSDP configs for FSDP pitfalls (pass `code` as text, or `paths` inside your roots),
`plan` estimates per-GPU memory and recommends a sharding strategy, `explain` maps an error
message or log to its cause and fix, `hang` reads every rank's logs or flight-recorder dumps
and finds where the ranks diverged, `env` checks this machine's distributed setup and
recommends a backend. The references are also available as resources."""


def bundle_dir() -> Path:
    """The skill bundle whose references are served (the one search reads)."""
    try:
        from fsdp_skill.search import bundle_dir as search_bundle
    except ImportError:
        from fsdp_skill.bundle_files import BUNDLE_DIR

        return BUNDLE_DIR
    return search_bundle()


# --- roots -----------------------------------------------------------------------------


def root_paths(uris: Sequence[str]) -> list[Path]:
    """Local folders named by ``file://`` root URIs (other schemes are ignored)."""
    found = []
    for uri in uris:
        parsed = urlparse(uri)
        if parsed.scheme == "file" and parsed.netloc in ("", "localhost"):
            found.append(Path(url2pathname(parsed.path)))
    return found


_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}(?:/[A-Za-z0-9][\w.-]{0,95})?")


def is_model_name(model: str) -> bool:
    """Whether ``model`` names a model (a bundled name or a hub id) rather than a path.

    The MCP server looks names up on the hub only, never as a local path (which would be
    read relative to the server's working directory, wherever the roots are).
    """
    return bool(_HUB_ID.fullmatch(model)) and ".." not in model and "--" not in model


# --- the server ------------------------------------------------------------------------


def publish_as(fn: Callable[..., Any], renames: dict[str, str]) -> Callable[..., Any]:
    """``fn`` with parameters published under other names (``{python name: wire name}``).

    Pydantic reserves ``model_config``, so the tool argument of that name is a Python
    parameter with another name and the wire name as its alias; the SDK calls tools with
    the wire names, which the wrapper maps back.
    """
    from pydantic import Field

    hints = typing.get_type_hints(fn, include_extras=True)
    back = {wire: name for name, wire in renames.items()}
    params = []
    annotations: dict[str, Any] = {}
    for param in inspect.signature(fn).parameters.values():
        hint = hints.get(param.name, param.annotation)
        if param.name in renames:
            hint = Annotated[hint, Field(alias=renames[param.name])]
        annotations[param.name] = hint
        params.append(param.replace(annotation=hint))
    annotations["return"] = hints.get("return", Any)

    @functools.wraps(fn)
    def wrapper(**kwargs: Any) -> Any:
        return fn(**{back.get(k, k): v for k, v in kwargs.items()})

    wrapper.__signature__ = inspect.Signature(params, return_annotation=annotations["return"])  # type: ignore[attr-defined]
    wrapper.__annotations__ = annotations
    del wrapper.__wrapped__  # the SDK must read the published signature, not fn's
    return wrapper


def output_types() -> dict[str, type]:
    """Each tool's result type: the DESIGN §3 fields it must have; more fields pass through.

    The SDK publishes these as the tools' output schemas and checks every result against
    them, so a result that breaks the contract is reported instead of sent.
    """
    from typing_extensions import TypedDict

    allow_more = {"extra": "allow"}

    class SearchResult(TypedDict):
        query: str
        results: list[dict[str, Any]]

    class Section(TypedDict):
        id: str
        title: str
        path: str
        url: str | None
        text: str

    class LintResult(TypedDict):
        findings: list[dict[str, Any]]
        files: int
        errors: list[dict[str, Any]]

    class PlanResult(TypedDict):
        model: dict[str, Any]
        strategies: list[dict[str, Any]]
        recommendation: dict[str, Any]

    class ExplainResult(TypedDict):
        matches: list[dict[str, Any]]
        related: list[dict[str, Any]]
        hang: dict[str, Any] | None

    class HangResult(TypedDict):
        ranks: int
        verdict: str | None
        culprit_ranks: list[int]
        first_divergence: dict[str, Any] | None
        advice: Any
        inputs: list[dict[str, Any]]

    class EnvResult(TypedDict):
        torch: dict[str, Any]
        cuda: dict[str, Any]
        nccl: dict[str, Any]
        devices: list[dict[str, Any]]
        backend_recommendation: dict[str, Any]
        env_vars: dict[str, str]
        warnings: list[dict[str, Any]]

    types = {
        "search": SearchResult,
        "show": Section,
        "lint": LintResult,
        "plan": PlanResult,
        "explain": ExplainResult,
        "hang": HangResult,
        "env": EnvResult,
    }
    for kind in types.values():
        kind.__pydantic_config__ = allow_more  # type: ignore[attr-defined]
    return types


def build_server(extra_roots: Sequence[Path] = ()):
    """The MCP server with every tool and reference resource registered."""
    from mcp.server.mcpserver import Context, ListRoots, MCPServer, Resolve
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.server.mcpserver.resources import FileResource
    from mcp_types import ListRootsResult, ToolAnnotations
    from pydantic import Field

    server_roots = [Path(r) for r in extra_roots]
    app = MCPServer(
        "pytorch-fsdp",
        title="PyTorch FSDP expert",
        instructions=INSTRUCTIONS,
        version=__version__,
        log_level="WARNING",
    )
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
    # plan(model=ID) may fetch the model's config from the Hugging Face hub.
    reads_hub = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=True)

    def ask_roots(ctx: Context, paths: list[str] | None = None) -> ListRoots | None:
        """Ask the client for its roots, only when paths were given and it can answer."""
        caps = ctx.client_capabilities
        if paths and caps is not None and caps.roots is not None:
            return ListRoots()
        return None

    def ask_roots_for_config(
        ctx: Context, model_config: object = None, model: object = None
    ) -> ListRoots | None:
        local = [x for x in (model_config,) if isinstance(x, str)]
        if isinstance(model, str) and not is_model_name(model):
            local.append(model)
        return ask_roots(ctx, local)

    def allowed_roots(answer: ListRootsResult | None) -> Roots:
        client = root_paths([str(r.uri) for r in answer.roots]) if answer else []
        return Roots.of([*client, *server_roots])

    def call(fn: Callable[..., dict], *args: Any, **kwargs: Any) -> dict:
        """Run a toolkit function; its usage errors become tool errors for the client."""
        try:
            return fn(*args, **kwargs)
        except UsageError as exc:
            raise ToolError(str(exc)) from None
        except OSError as exc:
            raise ToolError(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": ")) from None

    def tool_module(name: str, attr: str) -> Callable[..., dict]:
        import importlib

        try:
            module = importlib.import_module(f"fsdp_skill.{name}")
            return getattr(module, attr)
        except (ImportError, AttributeError):
            raise ToolError(f"the {attr} tool is not available in this installation") from None

    def paths_in_roots(paths: list[str], roots: Roots) -> list[str]:
        try:
            return [str(roots.locate(p)) for p in paths]
        except UsageError as exc:
            raise ToolError(str(exc)) from None

    out = output_types()
    Query = Annotated[str, Field(min_length=1, max_length=MAX_QUERY)]
    Text = Annotated[str, Field(min_length=1, max_length=MAX_TEXT)]
    Codes = Annotated[
        list[Annotated[str, Field(pattern=CODE_PATTERN, max_length=20)]] | None,
        Field(max_length=MAX_CODES, description="Lint codes or prefixes, e.g. FSDP001."),
    ]
    RootsAnswer = Annotated[ListRootsResult | None, Resolve(ask_roots)]

    @app.tool(annotations=read_only, structured_output=True)
    def search(
        query: Annotated[Query, Field(description="What you are looking for, in words.")],
        k: Annotated[int, Field(ge=1, le=50, description="How many sections.")] = 5,
    ) -> out["search"]:  # type: ignore[valid-type]
        """Rank the skill's reference sections for a question; returns ids to pass to show."""
        return call(tool_module("search", "search"), query, k=k)

    @app.tool(annotations=read_only, structured_output=True)
    def show(
        id: Annotated[
            str, Field(min_length=1, max_length=MAX_ID, description="A section id from search.")
        ],
        with_pitfalls: Annotated[
            bool, Field(description="Also list the pitfalls it links, one line each.")
        ] = False,
    ) -> out["show"]:  # type: ignore[valid-type]
        """One whole reference section, by the id search returned."""
        return call(tool_module("search", "show"), id, with_pitfalls=with_pitfalls)

    @app.tool(annotations=read_only, structured_output=True)
    def lint(
        code: Annotated[
            str | None, Field(max_length=MAX_TEXT, description="Python source to check.")
        ] = None,
        paths: Annotated[
            list[Annotated[str, Field(max_length=MAX_PATH)]] | None,
            Field(
                min_length=1,
                max_length=MAX_LINT_PATHS,
                description=(
                    "Files or folders to check (Python, and accelerate / fsdp_config YAML or "
                    "JSON), inside the client's roots."
                ),
            ),
        ] = None,
        select: Codes = None,
        ignore: Codes = None,
        roots: RootsAnswer = None,
    ) -> out["lint"]:  # type: ignore[valid-type]
        """Check FSDP training code, and Hugging Face FSDP configs given in `paths`, for known
        pitfalls: give `code` (Python) or `paths`, not both."""
        if (code is None) == (paths is None):
            raise ToolError("give either code (the source text) or paths, not both or neither")
        if code is not None:
            return call(
                tool_module("lint", "lint_source"), code, "<input>", select=select, ignore=ignore
            )
        allowed = allowed_roots(roots)
        checked = paths_in_roots(paths or [], allowed)
        return call(
            tool_module("lint", "lint_paths"), checked, select=select, ignore=ignore, roots=allowed
        )

    def plan(
        gpus: Annotated[
            int, Field(ge=1, le=1_000_000, description="GPUs in all, over every node.")
        ],
        gpu_memory: Annotated[
            Annotated[str, Field(min_length=1, max_length=32)] | Annotated[int, Field(ge=1)],
            Field(description="Memory per GPU, e.g. '80GB', or bytes."),
        ],
        params: Annotated[
            int | str | None,
            Field(description="Parameter count, e.g. 7000000000 or '7B'."),
        ] = None,
        config_path: Annotated[
            Annotated[str, Field(max_length=MAX_PATH)] | dict[str, Any] | None,
            Field(description="A model's config.json: its path inside the roots, or its content."),
        ] = None,
        model: Annotated[
            str | None,
            Field(
                max_length=MAX_PATH,
                description="A bundled name (llama-3-8b…), a Hugging Face hub id (org/name), "
                "or a local model folder inside the roots.",
            ),
        ] = None,
        nodes: Annotated[int, Field(ge=1, le=100_000, description="Hosts the GPUs span.")] = 1,
        seq_len: Annotated[
            int | None, Field(ge=1, le=10_000_000, description="Tokens per sample.")
        ] = None,
        micro_batch: Annotated[
            int | None, Field(ge=1, le=1_000_000, description="Samples per GPU per step.")
        ] = None,
        precision: Annotated[
            Literal["bf16", "fp16", "fp32"], Field(description="Compute/parameter precision.")
        ] = "bf16",
        optimizer: Annotated[
            Literal["adamw", "adam", "sgd", "sgd-nomomentum"],
            Field(description="Optimizer (sets its state size)."),
        ] = "adamw",
        activation_checkpointing: Annotated[
            bool, Field(description="Compare only strategies with activation checkpointing.")
        ] = False,
        reduce_dtype: Annotated[
            Literal["fp32", "bf16", "fp16"] | None,
            Field(description="Gradient reduce-scatter dtype [fp32]."),
        ] = None,
        attention: Annotated[
            Literal["sdpa", "eager"] | None, Field(description="Attention kernel [sdpa].")
        ] = None,
        headroom: Annotated[
            float | None, Field(ge=0, lt=1, description="Fraction of GPU memory kept free [0.1].")
        ] = None,
        bandwidth: Annotated[
            str | None, Field(max_length=32, description="Bus bandwidth within a node: '150GB/s'.")
        ] = None,
        inter_node_bandwidth: Annotated[
            str | None, Field(max_length=32, description="Between nodes: '400Gbps', '25GB/s'.")
        ] = None,
        interconnect: Annotated[
            Literal["nvlink", "pcie"] | None,
            Field(description="Default intra-node bandwidth when bandwidth is not given."),
        ] = None,
        network: Annotated[
            Literal["infiniband", "ethernet"] | None,
            Field(
                description="Default inter-node bandwidth when inter_node_bandwidth is not given."
            ),
        ] = None,
        cpu_memory: Annotated[
            str | None,
            Field(
                max_length=32, description="CPU memory per node, e.g. '1TB', to check offloading."
            ),
        ] = None,
        mfu: Annotated[
            float | None, Field(gt=0, le=1, description="Fraction of peak FLOP/s reached [0.4].")
        ] = None,
        gpu_flops: Annotated[
            str | None, Field(max_length=32, description="Peak per GPU: '989TFLOPS' [H100 SXM].")
        ] = None,
        cpu_adam_rate: Annotated[
            str | None,
            Field(max_length=32, description="CPU AdamW parameters/s per rank with offload."),
        ] = None,
        lora_rank: Annotated[
            int | None,
            Field(ge=0, le=65_536, description="Plan LoRA adapters of this rank on a frozen base."),
        ] = None,
        roots: Annotated[ListRootsResult | None, Resolve(ask_roots_for_config)] = None,
    ) -> out["plan"]:  # type: ignore[valid-type]
        """Per-GPU memory and communication of each FSDP strategy, and a recommendation."""
        if isinstance(params, str) and len(params) > 32:
            raise ToolError("params: at most 32 characters")
        given = [x for x in (params, config_path, model) if x is not None]
        if len(given) != 1:
            raise ToolError("give exactly one of params, model_config or model")
        options: dict[str, Any] = {
            "gpus": gpus,
            "nodes": nodes,
            "gpu_memory": gpu_memory,
            "precision": precision,
            "optimizer": optimizer,
            "activation_checkpointing": activation_checkpointing,
        }
        optional = {
            "seq_len": seq_len,
            "micro_batch": micro_batch,
            "reduce_dtype": reduce_dtype,
            "attention": attention,
            "headroom": headroom,
            "bandwidth": bandwidth,
            "inter_node_bandwidth": inter_node_bandwidth,
            "interconnect": interconnect,
            "network": network,
            "cpu_memory": cpu_memory,
            "mfu": mfu,
            "gpu_flops": gpu_flops,
            "cpu_adam_rate": cpu_adam_rate,
            "lora_rank": lora_rank,
        }
        options.update({key: value for key, value in optional.items() if value is not None})
        if isinstance(config_path, dict):
            if len(json.dumps(config_path)) > MAX_TEXT:
                raise ToolError(f"model_config: larger than {MAX_TEXT} characters")
            options["model_config"] = config_path
        elif config_path is not None:
            options["model_config"] = paths_in_roots([config_path], allowed_roots(roots))[0]
        elif model is not None and not is_model_name(model):
            # a local folder or config file: inside the roots, like every path
            options["model"] = paths_in_roots([model], allowed_roots(roots))[0]
        elif model is not None:
            options["model"] = model
            options["local_paths"] = False  # a name is looked up on the hub, never on disk
        else:
            options["params"] = params
        return call(tool_module("plan", "plan"), **options)

    app.add_tool(
        publish_as(plan, {"config_path": "model_config"}),
        annotations=reads_hub,
        structured_output=True,
    )

    @app.tool(annotations=read_only, structured_output=True)
    def explain(
        text: Annotated[Text, Field(description="The error message or log to explain.")],
    ) -> out["explain"]:  # type: ignore[valid-type]
        """What an FSDP / torch.distributed error or log means, and what to do."""
        return call(tool_module("diagnose", "explain"), text)

    @app.tool(annotations=read_only, structured_output=True)
    def hang(
        paths: Annotated[
            list[Annotated[str, Field(max_length=MAX_PATH)]],
            Field(
                min_length=1,
                max_length=MAX_HANG_PATHS,
                description="Every rank's logs or flight-recorder dumps, inside the roots.",
            ),
        ],
        roots: RootsAnswer = None,
    ) -> out["hang"]:  # type: ignore[valid-type]
        """Find where hung ranks diverged, from their logs or flight-recorder dumps."""
        allowed = allowed_roots(roots)
        checked = paths_in_roots(paths, allowed)
        return call(tool_module("diagnose", "hang"), checked, roots=allowed)

    @app.tool(annotations=read_only, structured_output=True)
    def env(
        topic: Annotated[
            Literal["hang", "init", "perf", "topology"] | None,
            Field(description="Also list the variables to export for this investigation."),
        ] = None,
        deep: Annotated[
            bool,
            Field(description="Also import torch (a few seconds) to ask what it can use."),
        ] = False,
    ) -> out["env"]:  # type: ignore[valid-type]
        """This machine's distributed setup (torch, GPUs, links, networks, variables) and the
        backend to use; runs on the server's host."""
        return call(tool_module("doctor", "env"), topic, deep=deep)

    for uri, path, title in reference_files(bundle_dir()):
        app.add_resource(
            FileResource(
                uri=uri,
                name=path.name,
                title=title,
                description=f"{title} (the pytorch-fsdp skill)",
                mime_type="text/markdown",
                path=path.resolve(),
            )
        )
    return app


def _title(path: Path) -> str:
    """The first Markdown heading of ``path`` (front matter skipped), else its name."""
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for _, line in zip(range(60), handle, strict=False):
                if line.startswith("# "):
                    return line[2:].strip()
    except OSError:
        pass
    return path.stem


def reference_files(bundle: Path) -> list[tuple[str, Path, str]]:
    """``(uri, file, title)`` for SKILL.md and every Markdown file in ``references/``."""
    found = []
    skill = bundle / "SKILL.md"
    if skill.is_file():
        found.append((f"{RESOURCE_SCHEME}://skill/SKILL.md", skill, f"{SKILL_NAME} skill"))
    refs = bundle / "references"
    if refs.is_dir():
        for path in sorted(refs.glob("*.md")):
            found.append((f"{RESOURCE_SCHEME}://references/{path.name}", path, _title(path)))
    return found


def serve(roots: Sequence[Path] = ()) -> None:
    """Run the server on stdin/stdout until the client disconnects."""
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError:
        raise UsageError(
            "the MCP server needs the mcp package (2.3 or newer): pip install 'mcp>=2.3,<3'"
        ) from None
    if sys.stdin.isatty():
        sys.stderr.write(
            "fsdp-skill mcp: serving MCP on stdin/stdout; an MCP client starts this command "
            "(Ctrl-C to stop)\n"
        )
    import anyio

    anyio.run(_serve_stdio, build_server(roots))


async def _serve_stdio(app: Any) -> None:
    """``app.run("stdio")``, except that a frame that is not a JSON-RPC message gets its
    JSON-RPC error back (-32700 when it is not JSON, -32600 when it is JSON but no message)
    instead of being dropped, and the server goes on serving."""
    import anyio
    from mcp.server.stdio import stdio_server

    server = app._lowlevel_server  # what MCPServer.run_stdio_async runs
    async with stdio_server() as (read_stream, write_stream):
        to_server, from_transport = anyio.create_memory_object_stream(0)

        async def answer_bad_frames() -> None:
            async with to_server:
                async for item in read_stream:
                    if isinstance(item, Exception):
                        await write_stream.send(frame_error(item))
                    else:
                        await to_server.send(item)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(answer_bad_frames)
            await server.run(from_transport, write_stream, server.create_initialization_options())


def frame_error(exc: Exception) -> Any:
    """The JSON-RPC error answering a frame the transport could not read (``exc``).

    Its ``id`` is the frame's own when the frame is a JSON object with a valid one (a string
    or an integer), so that the client can tell which of its requests failed; else ``null``,
    as JSON-RPC 2.0 asks when the id cannot be read."""
    from mcp.shared.message import SessionMessage
    from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError

    errors = getattr(exc, "errors", lambda: [])()
    not_json = any(e.get("type") == "json_invalid" for e in errors)
    code, message = (
        (PARSE_ERROR, "Parse error: the frame is not JSON")
        if not_json
        else (INVALID_REQUEST, "Invalid Request: the frame is not a JSON-RPC 2.0 message")
    )
    return SessionMessage(
        JSONRPCError(
            jsonrpc="2.0", id=_frame_id(errors), error=ErrorData(code=code, message=message)
        )
    )


def _frame_id(errors: list[dict]) -> str | int | None:
    """The ``id`` of the JSON object a validation error reports on, if it is a valid id."""
    for error in errors:
        frame = error.get("input")
        if isinstance(frame, dict):
            found = frame.get("id")
            if isinstance(found, str | int) and not isinstance(found, bool):
                return found
    return None
