"""What the window remembers about its own layout (which side panels are open), in a small JSON
file next to the settings. Qt-free; a missing or broken file means the defaults."""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path


@dataclass
class UiState:
    show_conversations: bool = True
    show_side_panel: bool = True  # settings and memory
    quit_notice_seen: bool = False  # Ctrl+Q mid-reply said once that the partial reply is kept
    memory_details: bool = False  # the gauge and settings in exact terms (the "Details" toggle)

    @classmethod
    def load(cls, path: Path) -> "UiState":
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return cls()
        if not isinstance(data, dict):
            return cls()
        return cls(**{f.name: data[f.name] for f in fields(cls) if isinstance(data.get(f.name), bool)})

    def remember(self, path: Path, **changes) -> None:
        """Change some fields and save them at once."""
        for name, value in changes.items():
            setattr(self, name, value)
        self.save(path)

    def save(self, path: Path) -> None:
        """Best effort: a layout preference is not worth an error message."""
        path = Path(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(asdict(self)), encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            pass
