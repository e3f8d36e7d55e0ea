#!/usr/bin/env python3
"""console_browser.py -- the web console in headless Chromium against a real
sakerd (docs/console.md).  Standard library only: it speaks the W3C
WebDriver protocol to chromedriver over HTTP.

Checks: the overview lists a queue and its count follows a set, and its
depth sparkline (sampled every 0.2 s here) follows too; the queue page
peeks an item without taking it, draws the depth chart, and lists an open
item with its holder until the holder disconnects; a dead-letter requeue from the page
(confirm() accepted) moves the items back; a queue name and item data
made of HTML stay text (no element, no script runs); a non-admin login
gets no console while an admin's login gets it.

Exit 0 pass, 1 fail, 77 skip (chromium or chromedriver missing; under
CI=true that is a failure instead).  SCREENSHOT=FILE saves the overview
(docs/console.png is made this way).  SAKERD names the server binary.
"""
import base64
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HOSTILE_Q = "<img_src=x_onerror=alert(1)>"
HOSTILE_DATA = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'
TIMEOUT = 20.0


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def find(names):
    for n in names:
        p = shutil.which(n)
        if p:
            return p
    return None


def free_port():
    # below the ephemeral range, as tests/testlib.c does
    for _ in range(200):
        port = random.randint(20000, 31999)
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            s.close()
    fail("no free port")


def wait_port(port, proc, what):
    deadline = time.time() + TIMEOUT
    while time.time() < deadline:
        if proc.poll() is not None:
            fail("%s exited with %s" % (what, proc.returncode))
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    fail("%s never listened on %d" % (what, port))


class Sakerd:
    def __init__(self, tmp, extra=()):
        self.port = free_port()
        self.http = free_port()
        self.log = open(os.path.join(tmp, "sakerd-%d.log" % self.port), "w")
        self.proc = subprocess.Popen(
            [os.environ.get("SAKERD", "./sakerd"), "-l", "127.0.0.1", "-p",
             str(self.port), "--store", "memory", "--http",
             "127.0.0.1:%d" % self.http] + list(extra),
            stdout=self.log, stderr=subprocess.STDOUT)
        wait_port(self.http, self.proc, "sakerd --http")
        wait_port(self.port, self.proc, "sakerd")
        self.sock = socket.create_connection(("127.0.0.1", self.port), 5)
        self.buf = b""

    def line(self):
        while b"\r\n" not in self.buf:
            d = self.sock.recv(65536)
            if not d:
                fail("sakerd closed the connection")
            self.buf += d
        l, self.buf = self.buf.split(b"\r\n", 1)
        return l

    def cmd(self, text, data=None):
        self.sock.sendall(text.encode() + b"\r\n" +
                          (data + b"\r\n" if data is not None else b""))
        return self.line()

    def set(self, q, data):
        d = data.encode()
        r = self.cmd("set %s 0 0 %d" % (q, len(d)), d)
        if r != b"STORED":
            fail("set %s: %r" % (q, r))

    def get(self, q):
        r = self.cmd("get " + q)
        if r == b"END":
            return None
        n = int(r.split()[-1])
        while len(self.buf) < n + 2:
            self.buf += self.sock.recv(65536)
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        if self.line() != b"END":
            fail("get %s: no END" % q)
        return data.decode()

    def api(self, path, auth=None):
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.http, path))
        if auth:
            req.add_header("Authorization", "Basic " +
                           base64.b64encode(auth.encode()).decode())
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.load(r)

    def items(self, name, auth=None):
        for q in self.api("/api/queues?limit=1000", auth)["queues"]:
            if q["name"] == name:
                return q["items"]
        return None

    def stop(self):
        self.sock.close()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


class Browser:
    def __init__(self, chrome, driver, tmp):
        self.port = free_port()
        self.log = open(os.path.join(tmp, "chromedriver.log"), "w")
        self.proc = subprocess.Popen([driver, "--port=%d" % self.port],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        wait_port(self.port, self.proc, "chromedriver")
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "unhandledPromptBehavior": "ignore",
            "goog:chromeOptions": {
                "binary": chrome,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1400,640",
                         "--no-first-run", "--disable-extensions",
                         "--user-data-dir=" + os.path.join(tmp, "profile")]}}}}
        r = self.call("POST", "/session", caps)
        self.sid = r["sessionId"] if "sessionId" in r else r["value"]["sessionId"]

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path),
                                     data=data, method=method)
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:
            return {"error": e.code, "value": json.load(e)}

    def s(self, method, path, body=None):
        r = self.call(method, "/session/%s%s" % (self.sid, path), body)
        if "error" in r:
            raise RuntimeError("webdriver %s %s: %s" % (method, path, r["value"]))
        return r["value"]

    def login(self, cred):
        """HTTP Basic credentials on every request of the page from now on
        (Chrome DevTools, through chromedriver)."""
        self.s("POST", "/goog/cdp/execute", {"cmd": "Network.enable", "params": {}})
        self.s("POST", "/goog/cdp/execute", {"cmd": "Network.setExtraHTTPHeaders", "params": {
            "headers": {"Authorization": "Basic " + base64.b64encode(cred.encode()).decode()}}})

    def go(self, url):
        self.s("POST", "/url", {"url": url})

    def js(self, script, *args):
        return self.s("POST", "/execute/sync", {"script": script, "args": list(args)})

    def until(self, what, script, *args):
        deadline = time.time() + TIMEOUT
        last = None
        while time.time() < deadline:
            last = self.js(script, *args)
            if last:
                return last
            time.sleep(0.1)
        fail("%s (last: %r)" % (what, last))

    def click(self, css):
        e = self.s("POST", "/element", {"using": "css selector", "value": css})
        eid = list(e.values())[0]
        self.s("POST", "/element/%s/click" % eid, {})

    def quit(self):
        try:
            self.s("DELETE", "")
        except Exception:
            pass
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


ROWS = ("return [...document.querySelectorAll('#queues tbody tr')]"
        ".map(r => [r.dataset.queue, r.querySelector('td.name').textContent,"
        " r.querySelector('td.items').textContent]);")


def row_count(b, name, count):
    return b.until("overview shows %s with %s items" % (name, count),
                   "const want = arguments[0], n = arguments[1];" + ROWS.replace(
                       "return ", "const rows = ") +
                   "return rows.some(r => r[0] === want && r[1] === want && r[2] === n);",
                   name, count)


def main():
    chrome = find(["chromium", "chromium-browser", "google-chrome"])
    driver = find(["chromedriver"])
    if not os.path.exists(driver or "") and os.path.exists("/usr/lib/chromium/chromedriver"):
        driver = "/usr/lib/chromium/chromedriver"
    if chrome is None or driver is None:
        msg = "chromium and chromium-driver (Debian packages) are not installed"
        if os.environ.get("CI") == "true":
            fail(msg + " (CI=true: not skipped)")
        print("SKIP: " + msg)
        return 77

    tmp = tempfile.mkdtemp(prefix="saker-browser-")
    srv = b = None
    try:
        srv = Sakerd(tmp, ["--http-history", "0.2"])
        # a few queues to look at
        srv.set("jobs", "first job")
        for i in range(3):
            srv.set("emails", "mail %d" % i)
        srv.set(HOSTILE_Q, HOSTILE_DATA)
        b = Browser(chrome, driver, tmp)
        base = "http://127.0.0.1:%d/" % srv.http
        b.go(base)

        # the overview lists the queue; its count follows a set
        row_count(b, "jobs", "1")
        srv.set("jobs", "second job")
        row_count(b, "jobs", "2")

        # its sparkline: an SVG made with DOM calls, following the depth
        b.until("the jobs row has a sparkline that reached 2",
                "const r = [...document.querySelectorAll('#queues tbody tr')]"
                ".find(r => r.dataset.queue === 'jobs');"
                "const s = r && r.querySelector('td.spark svg.sparkline');"
                "return s && s.dataset.last === '2' && Number(s.dataset.samples) > 1 && "
                "s.querySelector('polyline') !== null;")
        n0 = b.js("const r = [...document.querySelectorAll('#queues tbody tr')]"
                  ".find(r => r.dataset.queue === 'jobs');"
                  "return Number(r.querySelector('svg.sparkline').dataset.samples);")
        b.until("the sparkline gains samples",
                "const r = [...document.querySelectorAll('#queues tbody tr')]"
                ".find(r => r.dataset.queue === 'jobs');"
                "return Number(r.querySelector('svg.sparkline').dataset.samples) > arguments[0];",
                n0)

        # the hostile name is a row whose text is the name: no element made
        row_count(b, HOSTILE_Q, "1")
        if b.js("return document.querySelectorAll('img, main script').length") != 0:
            fail("an element was made from a queue name")

        if os.environ.get("SCREENSHOT"):
            srv.set("jobs_dead", "poison")
            srv.set("reports", "x" * 5000)
            # some traffic, for the rates
            for i in range(60):
                srv.set("events", "e%d" % i)
                if i % 3 == 0:
                    srv.get("emails")
                    srv.set("emails", "mail")
                time.sleep(0.05)
            row_count(b, "events", "60")
            png = base64.b64decode(b.s("GET", "/screenshot"))
            with open(os.environ["SCREENSHOT"], "wb") as f:
                f.write(png)
            srv.get("jobs_dead")
            srv.cmd("delete reports")

        # the queue page peeks without taking
        b.go(base + "#/q/jobs")
        b.until("the queue page shows jobs' first items",
                "const c = [...document.querySelectorAll('#items tbody td.preview')]"
                ".map(td => td.textContent);"
                "return c.length === 2 && c[0] === 'first job' && c[1] === 'second job';")
        time.sleep(2.5)         # a poll or two more
        if srv.items("jobs") != 2:
            fail("the queue page took items: %r" % srv.items("jobs"))
        if srv.get("jobs") != "first job":
            fail("jobs lost its head")

        # the queue page's chart, and an open item with its holder
        b.until("the queue page draws jobs' depth chart",
                "const s = document.querySelector('#qchart svg.big');"
                "return s && s.dataset.last === '1' && s.querySelector('polyline') !== null;")
        holder = socket.create_connection(("127.0.0.1", srv.port), 5)
        holder.sendall(b"get jobs/open\r\n")
        got = b""
        while not got.endswith(b"END\r\n"):
            d = holder.recv(65536)
            if not d:
                fail("holder: connection closed")
            got += d
        if b"second job" not in got:
            fail("holder got %r" % got)
        addr = "%s:%d" % holder.getsockname()
        b.until("the open item shows with its holder (%s)" % addr,
                "const r = [...document.querySelectorAll('#open tbody tr')];"
                "return r.length === 1 && r[0].querySelector('td.holder').textContent === "
                "'%s' && r[0].querySelector('td.user').textContent === '-';" % addr)
        holder.close()
        b.until("the open item is gone with its holder",
                "return document.querySelectorAll('#open tbody tr').length === 0 && "
                "!document.getElementById('noopen').hidden;")

        # hostile data on its queue page stays text, and no script ran
        b.go(base + "#/q/" + urllib.request.quote(HOSTILE_Q, safe=""))
        b.until("the hostile item shows as text",
                "return [...document.querySelectorAll('#items tbody td.preview')]"
                ".some(td => td.textContent === arguments[0]);", HOSTILE_DATA)
        if b.js("return document.getElementById('qname').textContent") != HOSTILE_Q:
            fail("the queue name is not shown as text")
        if b.js("return window.__xss === undefined && "
                "document.querySelectorAll('img, main script').length === 0") is not True:
            fail("hostile data became markup")

        # a dead-letter requeue from the page moves the items back
        for i in range(3):
            srv.set("jobs_dead", "dead %d" % i)
        b.go(base + "#/q/jobs_dead")
        b.until("the dead-letter queue page shows its items",
                "return document.querySelectorAll('#items tbody tr').length === 3 && "
                "!document.getElementById('actions').hidden;")
        b.click("#requeue-all")
        text = b.s("GET", "/alert/text")
        if "jobs_dead" not in text:
            fail("confirm() does not name the queue: %r" % text)
        b.s("POST", "/alert/accept", {})
        b.until("the page says what moved",
                "return document.getElementById('result').textContent === 'moved 3 to jobs';")
        if srv.items("jobs_dead") != 0 or srv.items("jobs") != 4:
            fail("requeue: jobs_dead %r, jobs %r" % (srv.items("jobs_dead"), srv.items("jobs")))
        for want in ["second job", "dead 0", "dead 1", "dead 2"]:
            got = srv.get("jobs")
            if got != want:
                fail("after requeue got %r, want %r" % (got, want))
        srv.stop()
        srv = None

        # with --auth-file: a non-admin gets no console, an admin does
        users = os.path.join(tmp, "users")
        fd = os.open(users, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, b"alice:apw:queues=jobs*,read,write\nroot:rpw:admin\n")
        os.close(fd)
        srv = Sakerd(tmp, ["--auth-file", users])
        url = "http://127.0.0.1:%d/" % srv.http
        b.login("alice:apw")
        b.go(url)
        time.sleep(1)
        # 401 with a challenge: headless Chromium shows an error page,
        # never the console
        if b.js("return document.getElementById('queues') === null && "
                "!String(document.body && document.body.textContent).includes('jobs')") is not True:
            fail("a non-admin got the console")
        b.login("root:rpw")
        b.go(url)
        b.until("an admin gets the console",
                "return document.getElementById('status').textContent.startsWith('updated') && "
                "document.getElementById('server').textContent.includes('memory');")
        try:
            srv.api("/api/queues", "alice:apw")
            fail("a non-admin read /api/queues")
        except urllib.error.HTTPError as e:
            if e.code != 401:
                fail("non-admin: %d" % e.code)
        if srv.api("/api/server", "root:rpw")["login_required"] is not True:
            fail("an admin cannot read /api/server")
        print("PASS: console in %s" % chrome)
        return 0
    finally:
        if b is not None:
            b.quit()
        if srv is not None:
            srv.stop()
        if os.environ.get("TL_KEEP"):
            print("kept " + tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
