"""Prints, for every BM_X/arg in Google Benchmark JSON files, its throughput as a
ratio of BM_XBaseline/arg measured in the same run (busbw, bytes_per_second, or
items_per_second). With repetitions, the medians are compared."""
import json
import pathlib
import sys


def rate(b):
    for key in ("busbw", "bytes_per_second", "items_per_second"):
        if key in b:
            return key, float(b[key])
    return None, None


def main(outdir):
    for path in sorted(pathlib.Path(outdir).glob("*.json")):
        benchmarks = json.loads(path.read_text())["benchmarks"]
        # The median of each benchmark that ran repeatedly, else its one run.
        runs = {}
        for b in benchmarks:
            name = b["run_name"] if "run_name" in b else b["name"]
            if b.get("aggregate_name") == "median" or (
                    b.get("run_type") != "aggregate" and name not in runs):
                runs[name] = b
        print(f"-- {path.stem}")
        for name, b in runs.items():
            base, _, arg = name.partition("/")
            if base.endswith("Baseline"):
                continue
            ref = runs.get(f"{base}Baseline/{arg}" if arg else f"{base}Baseline")
            key, value = rate(b)
            if ref is None or value is None:
                continue
            _, ref_value = rate(ref)
            if key == "items_per_second":
                print(f"{name:45s} {b.get('label', ''):10s} {value:10.2f} /s  baseline "
                      f"{ref_value:10.2f} /s  ratio {value / ref_value:6.3f}")
            else:
                print(f"{name:45s} {key:16s} {value / 1e9:8.2f} GB/s  baseline "
                      f"{ref_value / 1e9:8.2f} GB/s  ratio {value / ref_value:5.2f}")


if __name__ == "__main__":
    main(sys.argv[1])
