"""How long the model library takes to list a folder of models (the issue's bar: 50 files in
under 3 s on the 2-core machine). The files are the default model's header (a real 49k-token
vocabulary with its merges: what the scan has to walk) without its weights, which the library
never reads, so nothing large is written.

    python -m bench.library_scan [--files 50]
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.library_scan", description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=50)
    args = ap.parse_args(argv)
    from engine import library
    from engine.model_locator import locate_model

    import gguf

    src = locate_model(None)
    header = src.read_bytes()[: int(gguf.GGUFReader(str(src)).data_offset)]
    with tempfile.TemporaryDirectory(prefix="pinwheel-library-") as d:
        for i in range(args.files):
            (Path(d) / f"model-{i:03d}.gguf").write_bytes(header)
        t0 = time.perf_counter()
        rows = library.library([d], home=Path(d) / "no-home")
        dt = time.perf_counter() - t0
    listed = sum(1 for r in rows if Path(r.path).parent == Path(d))
    print(f"listed {listed} files ({src.name}: {len(rows)} rows) in {dt:.2f} s: {dt / max(listed, 1) * 1000:.0f} ms a file")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
