from ._device import get_device

__all__ = ["get_device"]
