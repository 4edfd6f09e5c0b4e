"""User-facing errors.

Every failure a user can cause (a bad model file, an impossible setting, a hostile
chat template) is raised as a PinwheelError whose str() is one clear line; the CLI
prints that line and exits non-zero, the app shows it in a message box.
"""


class PinwheelError(Exception):
    """Base class: str(err) is a single human-readable line."""


class ModelFileError(PinwheelError):
    """The model file is missing, unreadable, malformed or unsupported."""


class NotEnoughMemoryError(ModelFileError):
    """The model would not fit in the memory this machine has available; says by how much."""


class SettingsError(PinwheelError):
    """A memory or sampling setting that cannot be honoured; says what would fit."""


class TemplateError(PinwheelError):
    """The model's chat template failed, misbehaved or tried something unsafe."""


class CancelledError(PinwheelError):
    """Generation was cancelled by the user."""
