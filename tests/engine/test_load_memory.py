"""Loading holds each weight once: built in the arrays JAX adopts, the file's pages dropped as
it goes (issue 11: peak RSS during load <= 1.1x the steady RSS after it)."""
import subprocess
import sys
from pathlib import Path

from bench.ladder import Rung, write

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import resource, jax.numpy as jnp
from engine.sysmem import rss_bytes, trim
jnp.zeros(1).block_until_ready(); trim(); base = rss_bytes()
from engine import load_model
m = load_model({path!r}); trim()
steady = rss_bytes(); peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(base, steady, peak, m.weight_bytes)
"""


def test_load_peak_is_within_ten_percent_of_what_stays(tmp_path, tiny_bpe_gguf):
    # ~120M parameters of Q4_0 (65 MB of weights): big enough that a second copy would show
    path = write(Rung("load-memory", 8, 1024, 16, 4, 4096), "Q4_0", tiny_bpe_gguf, tmp_path / "m.gguf")
    r = subprocess.run([sys.executable, "-c", PROBE.format(path=str(path))], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    base, steady, peak, weights = map(int, r.stdout.split())
    assert steady - base >= weights  # the weights are really resident
    assert peak - base <= 1.1 * (steady - base), (base, steady, peak, weights)


def test_weight_bytes_predicts_what_loading_holds(tiny_bpe_gguf, tiny_spm_gguf, tmp_path):
    """From the tensor types alone (no data read), exactly what the loaded params take."""
    from engine import load_model
    from engine.gguf_loader import read_gguf, weight_bytes
    from tests.fixtures.tiny_gguf import write_tiny_gguf

    paths = [tiny_bpe_gguf, tiny_spm_gguf,
             write_tiny_gguf(tmp_path / "q4.gguf", tensor_type="Q4_0", embedding_type="Q8_0", tied=False),
             write_tiny_gguf(tmp_path / "k.gguf", tensor_type="Q4_K", d_model=256, ffn_dim=512)]
    for path in paths:
        types = {t.name: t.tensor_type.name for t in read_gguf(path).tensors}
        model = load_model(path)
        assert weight_bytes(model.config, types.get) == model.weight_bytes, path.name


def test_a_model_that_does_not_fit_is_refused_before_loading(tiny_bpe_gguf, monkeypatch):
    import psutil
    import pytest

    from engine import load_model
    from engine.errors import NotEnoughMemoryError

    class Tiny:
        available = 1000

    monkeypatch.setattr(psutil, "virtual_memory", lambda: Tiny)
    with pytest.raises(NotEnoughMemoryError) as e:
        load_model(tiny_bpe_gguf)
    msg = str(e.value)
    assert "tiny-bpe.gguf needs about" in msg and "short" in msg and "\n" not in msg
