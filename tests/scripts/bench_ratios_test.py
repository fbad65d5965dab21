#!/usr/bin/python3
"""scripts/bench_ratios.py pairs each BM_X run with the BM_XBaseline run of the
same arguments, whatever run-option segments either name carries, compares the
best setting of each, and says so when a benchmark has no baseline."""
import json
import pathlib
import subprocess
import sys
import tempfile


def run(files):
    with tempfile.TemporaryDirectory() as out:
        for name, benchmarks in files.items():
            (pathlib.Path(out) / name).write_text(json.dumps({"benchmarks": benchmarks}))
        script = pathlib.Path(sys.argv[1]) / "scripts" / "bench_ratios.py"
        return subprocess.run([sys.executable, str(script), out], check=True, capture_output=True,
                              text=True).stdout


def entry(name, gb_s):
    return {"name": name, "run_name": name, "run_type": "iteration", "bytes_per_second": gb_s * 1e9}


def main():
    out = run({"hop.json": [entry("BM_InProcessHop/262144/iterations:3/manual_time", 5),
                            entry("BM_InProcessHopBaseline/262144", 10),
                            entry("BM_InProcessHop/1048576/iterations:3/manual_time", 9),
                            entry("BM_InProcessHopBaseline/1048576", 12),
                            entry("BM_Lonely/7", 1)]})
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("BM_")}
    assert "ratio  0.50" in lines["BM_InProcessHop/262144/iterations:3/manual_time"], out
    assert "ratio  0.75" in lines["BM_InProcessHop/1048576/iterations:3/manual_time"], out
    assert "no baseline with the same arguments" in lines["BM_Lonely/7"], out
    assert "1.00 GB/s" in lines["BM_Lonely/7"], out
    # Settings: each side's best, from whichever setting gave it.
    out = run({"t@single_copy=none.json": [entry("BM_T/1024/manual_time", 4), entry("BM_TBaseline/1024", 8)],
               "t@single_copy=cma.json": [entry("BM_T/1024/manual_time", 6), entry("BM_TBaseline/1024", 5)]})
    line = next(l for l in out.splitlines() if l.startswith("BM_T/1024"))
    assert "ratio  0.75" in line and "[single_copy=cma vs single_copy=none]" in line, out
    # A reference without a baseline: its best rate over the settings, and which.
    out = run({"q@single_copy=none.json": [entry("BM_Q/1024/manual_time", 3)],
               "q@single_copy=cma.json": [entry("BM_Q/1024/manual_time", 2)]})
    line = next(l for l in out.splitlines() if l.startswith("BM_Q/1024"))
    assert "3.00 GB/s" in line and "[single_copy=none]" in line, out
    print("bench_ratios pairs runs by their arguments and compares the best settings")


if __name__ == "__main__":
    main()
