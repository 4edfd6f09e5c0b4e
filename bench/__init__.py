"""Benchmarks and long-running checks that live outside the engine and the test suite.

`python -m bench.run` (`pinwheel bench`): speed and memory side by side with llama.cpp;
`python -m bench.micro_linear`: the int8 matrix-vector spellings; other modules here
(`bench.soak`, `bench.fuzz_gguf`) carry their own docs. Nothing in engine/ or app/ imports this
package except `pinwheel bench`, which calls `bench.run.main`.
"""
