#!/usr/bin/python3
"""scripts/plot_sweep.py titles every plot with whose figures it shows: the runs'
own rate, AU and step parts "measured on this machine", pod_projection's AU
"projected for the pod" (issue 48: plots of this machine's noise under titles
that did not say so). Reads the title from the line the script prints per plot."""
import pathlib
import re
import subprocess
import sys
import tempfile

PARTS = ["infeed", "compute", "crs", "crs_sync", "apply", "device", "outfeed", "post_loop",
         "embedding_forward", "embedding_backward", "idle"]
HEADER = (["run", "input.cpu_us_per_example", "exit_code", "error", "hosts", "examples_per_s",
           "host_examples_per_s_min", "host_examples_per_s_max", "au_mean", "au_min", "infeed_percent",
           "verdict", "step_ms", "step_p50_ms", "step_p90_ms", "step_p99_ms", "infeed_wait_p50_ms",
           "infeed_wait_p90_ms", "infeed_wait_p99_ms"] + [p + "_ms" for p in PARTS] +
          ["projected_examples_per_s_per_host", "projected_bound_by", "projected_au", "projected_verdict"])


def row(run, cpu_us, au):
    values = {"run": run, "input.cpu_us_per_example": cpu_us, "exit_code": "0", "error": "", "hosts": "1",
              "examples_per_s": "1000", "host_examples_per_s_min": "1000", "host_examples_per_s_max": "1000",
              "au_mean": au, "au_min": au, "infeed_percent": "1", "verdict": "not input-bound",
              "projected_examples_per_s_per_host": "900", "projected_bound_by": "preprocessing",
              "projected_au": au, "projected_verdict": "not input-bound"}
    return ",".join(values.get(h, "1") for h in HEADER)


def titles(out_dir, *args):
    script = pathlib.Path(sys.argv[1]) / "scripts" / "plot_sweep.py"
    out = subprocess.run([sys.executable, str(script), out_dir, *args], check=True, capture_output=True,
                         text=True).stdout
    found = dict(re.findall(r"plot_sweep: wrote \S+/(\w+\.png) \(.*?\): (.*)", out))
    assert found, out
    return found


def main():
    with tempfile.TemporaryDirectory() as out:
        csv = [",".join(HEADER), row("run0", "0", "0.95"), row("run1", "100", "0.5")]
        (pathlib.Path(out) / "runs.csv").write_text("\n".join(csv) + "\n")
        measured = titles(out)
        assert set(measured) == {"throughput.png", "au.png", "breakdown.png"}, measured
        for name, title in measured.items():
            assert title.endswith("measured on this machine"), (name, title)
        projected = titles(out, "--au", "projected")
        assert projected["au.png"].endswith("projected for the pod"), projected
        assert projected["throughput.png"].endswith("measured on this machine"), projected
        (pathlib.Path(out) / "runs.csv").unlink()
        (pathlib.Path(out) / "capacity.csv").write_text("\n".join(csv) + "\n")
        assert titles(out, "--au", "projected")["capacity.png"].endswith("projected for the pod")
        assert titles(out)["capacity.png"].endswith("measured on this machine")
    print("plot_sweep titles: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
