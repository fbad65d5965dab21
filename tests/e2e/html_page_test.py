#!/usr/bin/python3
"""The HTML pages in a real browser: headless Chromium, driven over the DevTools
protocol on a pipe (--remote-debugging-pipe: no websocket library needed), opens
the page of a v3-8 run, of a short v5litepod-256 packed run, of a JAX-mesh run
(v4-32, data=4,fsdp=4) and a sweep's index, each with the network switched off.
Each page must log no console error and throw no exception, request nothing but
itself (every script and style inline), show its report's verdicts, draw one
placement mark per core (per host cell from 256 cores on; per point on a
sweep's index) as ECharts rendered them, and leave a screenshot in OUT_DIR.

Usage: html_page_test.py TPUSIM SOURCE_DIR OUT_DIR
"""
import base64
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
MAX_PAGE_BYTES = 5 * 1000 * 1000


class Browser:
    """Chromium with the DevTools protocol on fds 3 (commands) and 4 (replies)."""

    def __init__(self, profile):
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()

        # Above 10 first, so that neither is already 3 or 4 (dup2 onto itself would
        # leave it close-on-exec).
        to_chrome_r = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
        from_chrome_w = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)

        def fds():
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             "--no-first-run", "--disable-extensions", "--user-data-dir=" + profile, "about:blank"],
            close_fds=False, preexec_fn=fds,  # fds 3 and 4 made after subprocess would close them
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for fd in (to_chrome_r, from_chrome_w):
            os.close(fd)
        self.next_id, self.buffer, self.events = 0, b"", []

    def send(self, method, params=None, session=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_chrome, json.dumps(msg).encode() + b"\0")
        return self.wait(lambda m: m.get("id") == self.next_id, method)

    def wait(self, match, what, timeout_s=30):
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            while b"\0" in self.buffer:
                raw, self.buffer = self.buffer.split(b"\0", 1)
                msg = json.loads(raw)
                if match(msg):
                    if "error" in msg:
                        sys.exit("%s: %s" % (what, msg["error"]))
                    return msg
                self.events.append(msg)
            chunk = os.read(self.from_chrome, 1 << 20)
            if not chunk:
                sys.exit("chromium closed the pipe while waiting for " + what)
            self.buffer += chunk
        sys.exit("timed out waiting for " + what)

    def close(self):
        self.proc.kill()
        self.proc.wait()


def open_page(browser, path, shot):
    """Loads `path` offline; returns (what the page says of itself, every URL asked for, errors)."""
    target = browser.send("Target.createTarget", {"url": "about:blank"})["result"]["targetId"]
    session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["result"]["sessionId"]
    for method in ("Network.enable", "Runtime.enable", "Log.enable", "Page.enable"):
        browser.send(method, session=session)
    browser.send("Network.emulateNetworkConditions", {"offline": True, "latency": 0, "downloadThroughput": -1,
                                                      "uploadThroughput": -1}, session=session)
    browser.send("Emulation.setDeviceMetricsOverride", {"width": 1280, "height": 900, "deviceScaleFactor": 1,
                                                        "mobile": False}, session=session)
    browser.events = []
    browser.send("Page.navigate", {"url": "file://" + os.path.abspath(path)}, session=session)
    browser.wait(lambda m: m.get("method") == "Page.loadEventFired" and m.get("sessionId") == session, "load")
    state = browser.send("Runtime.evaluate", {"expression": PAGE_STATE, "returnByValue": True},
                         session=session)["result"]["result"]["value"]
    png = browser.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True},
                       session=session)["result"]["data"]
    with open(shot, "wb") as f:
        f.write(base64.b64decode(png))
    mine = [e for e in browser.events if e.get("sessionId") == session]
    urls = [e["params"]["request"]["url"] for e in mine if e.get("method") == "Network.requestWillBeSent"]
    errors = [json.dumps(e["params"])[:300] for e in mine
              if e.get("method") == "Runtime.exceptionThrown"
              or (e.get("method") == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert"))
              or (e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")]
    browser.send("Target.closeTarget", {"targetId": target})
    return json.loads(state), urls, errors


# What the page shows, read in the page: its text, the placement marks as ECharts
# holds them after rendering, and any element that would load something.
PAGE_STATE = """JSON.stringify({
  text: document.body.innerText,
  kind: window.tpusimPage.placementKind,
  marks: window.tpusimPage.placementMarks,
  rendered: (() => { const el = document.getElementById('placement') || document.getElementById('sweep');
                     const c = echarts.getInstanceByDom(el);
                     return c ? c.getModel().getSeriesByIndex(0).getData().count() : -1; })(),
  external: [...document.querySelectorAll('script[src], link[href], img[src], iframe[src], object[data]')]
              .map((e) => e.outerHTML.slice(0, 120)),
})"""


def tpusim(binary, *args):
    start = time.time()
    done = subprocess.run([binary, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        sys.exit("tpusim %s exited %d:\n%s" % (" ".join(args), done.returncode, done.stdout[-3000:]))
    return time.time() - start


def check_page(browser, html, shot, verdicts, marks, failures):
    size = os.path.getsize(html)
    state, urls, errors = open_page(browser, html, shot)
    name = os.path.basename(shot)
    own = "file://" + os.path.abspath(html)
    for url in urls:
        if url != own and not url.startswith("data:"):
            failures.append("%s: requested %s" % (name, url))
    failures += ["%s: element loads something: %s" % (name, e) for e in state["external"]]
    failures += ["%s: console: %s" % (name, e) for e in errors]
    failures += ["%s: does not show '%s'" % (name, v) for v in verdicts if v not in state["text"]]
    if state["marks"] != marks or state["rendered"] != marks:
        failures.append("%s: %d marks (%d rendered), expected %d" % (name, state["marks"], state["rendered"], marks))
    if size > MAX_PAGE_BYTES:
        failures.append("%s: %d bytes, over %d" % (name, size, MAX_PAGE_BYTES))
    print("%s: %d bytes, %d placement marks (%s), no network, %d console errors" %
          (name, size, state["rendered"], state["kind"] or "points", len(errors)))


def run_page(binary, src, work, name, config, sets):
    report, html = os.path.join(work, name + ".json"), os.path.join(work, name + ".html")
    args = ["launch", os.path.join(src, "configs/runs", config), "--report", report, "--html", html, "--quiet"]
    for s in sets:
        args += ["--set", s]
    seconds = tpusim(binary, *args)
    again = os.path.join(work, name + "-again.html")
    write_s = tpusim(binary, "report", report, "--html", again)
    print("%s: run %.1f s; tpusim report wrote its page again in %.2f s" % (name, seconds, write_s))
    return json.load(open(report)), html, write_s


def expected_marks(report):
    cores = report["placement"]["cores"]
    return len(cores) if len(cores) < 256 else len({c["host"] for c in cores})


def main():
    binary, src, out = sys.argv[1], sys.argv[2], sys.argv[3]
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    work = tempfile.mkdtemp(prefix="html-page-")
    start, failures = time.time(), []
    short = ["train.steps=8", "train.iterations_per_loop=4"]
    runs = [("v3-8", "v3-8-per-host.yaml", short),
            ("v5litepod-256", "v5e-256-host-cpu.yaml", short + ["input.cpu_us_per_example=20000"]),
            ("jax-mesh", "v4-32-jax-mesh.yaml", short)]
    browser = Browser(os.path.join(work, "profile"))
    try:
        for name, config, sets in runs:
            report, html, write_s = run_page(binary, src, work, name, config, sets)
            if name == "v5litepod-256" and write_s > 2:
                failures.append("v5litepod-256: writing its page took %.2f s, over 2 s" % write_s)
            verdicts = [report["verdict"], "verdict: " + report["answer"]["verdict"]]
            check_page(browser, html, os.path.join(out, name + ".png"), verdicts, expected_marks(report), failures)
        sweep = os.path.join(work, "sweep")
        tpusim(binary, "sweep", os.path.join(src, "configs/runs/v3-8-per-host.yaml"), "--out", sweep,
               "--vary", "input.cpu_us_per_example=0,3000", *sum((["--set", s] for s in short), []))
        rows = [json.load(open(os.path.join(sweep, r, "report.json"))) for r in ("run-001", "run-002")]
        for r in ("run-001", "run-002"):
            if not os.path.exists(os.path.join(sweep, r, "report.html")):
                failures.append("sweep: no %s/report.html to link to" % r)
        check_page(browser, os.path.join(sweep, "index.html"), os.path.join(out, "sweep.png"),
                   [r["verdict"].split(":")[0] for r in rows], 2, failures)
    finally:
        browser.close()
        shutil.rmtree(work, ignore_errors=True)
    print("browser test: %.1f s, screenshots in %s" % (time.time() - start, out))
    if failures:
        print("\n".join(failures))
        sys.exit(1)
    print("4 passed, 0 failed")


if __name__ == "__main__":
    main()
