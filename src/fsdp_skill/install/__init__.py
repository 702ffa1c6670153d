"""Install the skill bundle where each agent client reads skills, and remove it again."""

from fsdp_skill.install.clients import CLIENTS, detect
from fsdp_skill.install.installer import install, uninstall

__all__ = ["CLIENTS", "detect", "install", "uninstall"]
