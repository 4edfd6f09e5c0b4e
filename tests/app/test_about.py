"""The About box shows the one version number (engine/version.py) and the model."""
from app.launcher import get_version
from app.main_window import about_text
from engine.version import __version__


def test_about_shows_version_and_escaped_model_name():
    text = about_text("Tiny <model>")
    assert get_version() == __version__ and f"Pinwheel {__version__}" in text
    assert "Tiny &lt;model&gt;" in text
