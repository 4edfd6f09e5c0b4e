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
