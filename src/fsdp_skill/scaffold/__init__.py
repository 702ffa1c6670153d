"""``fsdp-skill new``: write a runnable, resumable FSDP2 training project.

The project's files are the bundle's ``assets/fsdp2-project`` templates; the options chosen on
the command line go into its ``train_config.json`` (and model config and README). Importing
this package does not import torch.
"""

from fsdp_skill.scaffold.project import OPTION_NAMES, TEMPLATE_DIR, new_project

__all__ = ["OPTION_NAMES", "TEMPLATE_DIR", "new_project"]
