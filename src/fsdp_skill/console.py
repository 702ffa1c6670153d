"""The ``fsdp-skill`` console entry point.

Ctrl-C at any moment, while click and the commands are still being imported included, ends
the command with one line on stderr and exit status 130 (128 + SIGINT, as shells expect),
never a traceback. Only ``sys`` is imported before the guard.
"""

import sys


def main(argv: list[str] | None = None) -> None:
    """Run the command line (``fsdp_skill.cli.main``) under the interrupt guard."""
    try:
        from fsdp_skill.cli import main as run

        run(argv)
    except KeyboardInterrupt:
        interrupted()


def interrupted() -> None:
    """Say so in one line and exit 130; a second Ctrl-C now just ends the process."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        sys.stderr.write("fsdp-skill: interrupted\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    sys.exit(130)


if __name__ == "__main__":
    main()
