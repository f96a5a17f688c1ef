"""Unit tests of jupyter-mcp-sidecar-feed, run against the installed jupyter-mcp-server.

python -m unittest discover -s jupyter_mcp_sidecar_feed/tests (from .ci/run, in the
jupyter-mcp-server virtual environment). The end-to-end test with the real sidecar, Jupyter
server and jupyter-mcp-server is sidecar/e2e/jupyter/mcpserver_test.go.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
import tracemalloc
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from unittest import mock

os.environ["JUPYTER_MCP_WATCH_NOTEBOOKS"] = "false"

from jupyter_mcp_server import notifications  # noqa: E402
from jupyter_mcp_server.notebook_manager import NotebookManager  # noqa: E402

from jupyter_mcp_sidecar_feed import compat, extension  # noqa: E402
from jupyter_mcp_sidecar_feed import sse  # noqa: E402
from jupyter_mcp_sidecar_feed.announce import Announcer, normalize  # noqa: E402
from jupyter_mcp_sidecar_feed.sse import FeedClient, Frame, frames, jittered, lines  # noqa: E402

TOKEN = "0123456789abcdef-test"


def wait_for(cond, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("not within %ss" % timeout)
        time.sleep(0.01)


def change(path, seq, **changes):
    body = {"added": [], "removed": [], "moved": [], "cells": {}, "metadata": False}
    body.update(changes)
    return Frame("change", f"e-{seq}", json.dumps({"v": 1, "seq": seq, "path": path, "changes": body}))


class FramesTest(unittest.TestCase):
    def test_parse(self):
        stream = ["retry: 1000", "", ": ping", "", "id: e-1", "event: hello", 'data: {"v":1}', "",
                  "id: e-2", "event: change", "data: a", "data: b", ""]
        self.assertEqual(list(frames(stream)), [Frame("hello", "e-1", '{"v":1}'), Frame("change", "e-2", "a\nb")])

    def test_frame_of_empty_data_lines_bounded(self):
        with self.assertRaises(sse.TooLarge):
            list(frames("data:" for _ in range(sse.MAX_FRAME_BYTES + 1)))


class LinesTest(unittest.TestCase):
    def test_line_ends_across_chunks(self):
        for name, chunks, want in [
            ("LF", [b"a\nb\n"], ["a", "b"]),
            ("CRLF", [b"a\r\nb\r\n"], ["a", "b"]),
            ("CR", [b"a\rb\r"], ["a", "b"]),
            ("CRLF split", [b"a\r", b"\nb\n"], ["a", "b"]),
            ("CR then CR", [b"a\r", b"\rb\n"], ["a", "", "b"]),
            ("a line over chunks", [b"ab", b"c", b"d\ne"], ["abcd"]),  # "e" unfinished: dropped
            ("UTF-8 split", ["é\n".encode()[:1], "é\n".encode()[1:]], ["é"]),
            ("empty chunks", [b"", b"a", b"", b"\n"], ["a"]),
        ]:
            with self.subTest(name):
                self.assertEqual(list(lines(chunks)), want)

    def test_long_line_refused_as_it_arrives(self):
        """A line over the limit raises once the limit is passed: no more of it is read."""
        for name, prefix in [("data", b"data: "), ("comment", b": "), ("no field", b"")]:
            with self.subTest(name):
                read = []

                def chunks():
                    yield prefix
                    for _ in range(1000):  # 1000 kB, never ended
                        read.append(1024)
                        yield b"x" * 1024

                with self.assertRaises(sse.TooLarge):
                    list(lines(chunks(), limit=64 << 10))
                self.assertLessEqual(sum(read), (64 << 10) + 1024)
        self.assertEqual(list(lines([b"x" * 100 + b"\n"], limit=100)), ["x" * 100])


class StubFeed:
    """An SSE endpoint in this process that scripts what each connection gets: a list
    of (id, event, data) frames, or bytes sent as they are (until the client leaves)."""

    def __init__(self, scripts):
        self.scripts = list(scripts)
        self.requests = []
        feed = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                feed.requests.append(dict(self.headers))
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    self.send_response(401)
                    self.end_headers()
                    return
                script = feed.scripts.pop(0) if feed.scripts else []
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                if callable(script):
                    try:
                        for piece in script():
                            self.wfile.write(piece)
                    except OSError:
                        pass  # the client left
                    return
                for ident, event, data in script:
                    self.wfile.write(f"id: {ident}\nevent: {event}\ndata: {data}\n\n".encode())
                    self.wfile.flush()
                # Then the connection ends: the client must resume.

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/events"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class FeedClientTest(unittest.TestCase):
    def test_resume_after_disconnect(self):
        feed = StubFeed([
            [("r-0", "hello", '{"v":1,"resumed":false}'), ("r-1", "change", "one"), ("r-2", "change", "two")],
            [("r-2", "hello", '{"v":1,"resumed":true}'), ("r-3", "change", "three")],
        ])
        self.addCleanup(feed.close)
        got, states = [], []
        client = FeedClient(feed.url, TOKEN, got.append, states.append, backoff=0.05)
        with self.assertLogs(sse.logger, "INFO") as logs:
            client.start()
            self.addCleanup(client.stop)
            wait_for(lambda: [f.data for f in got if f.event == "change"] == ["one", "two", "three"])
        self.assertNotIn("Last-Event-ID", feed.requests[0])
        self.assertEqual(feed.requests[1].get("Last-Event-ID"), "r-2")
        self.assertEqual(states[:3], [True, False, True])
        # Every stream opened is said, the one after the reconnect too.
        opened = [line for line in logs.output if "stream open" in line]
        self.assertEqual(len(opened), 2, logs.output)
        self.assertIn("resuming after r-2", opened[1])

    def test_frames_arrive_while_the_stream_stays_open(self):
        """Each frame is handed on as it arrives, not when a buffer fills or the stream ends."""
        release = threading.Event()

        def script():
            yield b"retry: 1000\n\nid: r-0\nevent: hello\ndata: {}\n\nid: r-1\nevent: change\ndata: one\n\n"
            release.wait(60)

        feed = StubFeed([script])
        self.addCleanup(feed.close)
        self.addCleanup(release.set)
        got = []
        client = FeedClient(feed.url, TOKEN, got.append, backoff=0.05)
        client.start()
        self.addCleanup(client.stop)
        wait_for(lambda: [f.data for f in got if f.event == "change"] == ["one"])
        self.assertFalse(release.is_set())
        self.assertEqual(client.connections, 1)

    def test_long_lines_end_the_stream_unread(self):
        """A 64 MB line — a data line, or a comment the parser skips — ends the connection
        once the line bound is passed: the client never holds the line (its peak memory
        stays a few bounds, not 64 MB), then resumes and goes on."""
        piece = b"x" * (1 << 20)

        def huge(prefix):
            def script():
                yield b"id: r-1\nevent: change\ndata: one\n\n" + prefix
                for _ in range(64):
                    yield piece
                yield b"\n\n"

            return script

        for name, prefix in [("data", b"data: "), ("comment", b": ")]:
            with self.subTest(name):
                feed = StubFeed([huge(prefix), [("r-1", "hello", '{"v":1,"resumed":true}'), ("r-2", "change", "two")]])
                self.addCleanup(feed.close)
                got = []
                client = FeedClient(feed.url, TOKEN, got.append, backoff=0.05)
                tracemalloc.start()
                self.addCleanup(tracemalloc.stop)
                client.start()
                self.addCleanup(client.stop)
                wait_for(lambda: [f.data for f in got if f.event == "change"] == ["one", "two"])
                _, peak = tracemalloc.get_traced_memory()
                tracemalloc.stop()
                self.assertEqual(feed.requests[1].get("Last-Event-ID"), "r-1")
                self.assertLess(peak, 3 * sse.MAX_LINE_BYTES, f"peak {peak / 1e6:.1f} MB while a 64 MB line arrived")

    def test_refused_token_retries_with_backoff(self):
        feed = StubFeed([])
        self.addCleanup(feed.close)
        got = []
        client = FeedClient(feed.url, "wrong-token", got.append, backoff=0.05, max_backoff=0.2)
        with self.assertLogs(sse.logger, "ERROR") as logs:
            client.start()
            self.addCleanup(client.stop)
            wait_for(lambda: len(feed.requests) >= 3)
        self.assertEqual(got, [])
        self.assertEqual(client.connections, 0)
        self.assertEqual(client.state, sse.REFUSED)
        # Loud, at every attempt, saying what to fix and what is lost meanwhile.
        self.assertGreaterEqual(len(logs.records), 2)
        self.assertIn("JUPYTER_MCP_SIDECAR_FEED_TOKEN", logs.output[0])
        self.assertIn("NOT announced", logs.output[0])

    def test_backoff_capped_with_jitter(self):
        # The README's 30 s is the longest wait, jitter included.
        waits = [jittered(30.0, 30.0) for _ in range(2000)]
        self.assertLessEqual(max(waits), 30.0)
        self.assertGreaterEqual(min(waits), 15.0)
        self.assertLess(min(jittered(1.0, 30.0) for _ in range(200)), 1.0)


class AnnouncerTest(unittest.TestCase):
    def setUp(self):
        self.bound = [("work", "team/a.ipynb"), ("again", "/team/./a.ipynb"), ("other", "b.ipynb")]
        self.announcer = Announcer(lambda: list(self.bound))

    def test_change(self):
        frame = change("team/a.ipynb", 1, added=["e0"], cells={"c1": {"parts": ["outputs"], "output_indexes": [0, 2]}})
        want = ("e0", "c1", "c1/outputs/0", "c1/outputs/2")
        self.assertEqual(self.announcer.handle(frame), [("work", want), ("again", want)])

    def test_version_field_ignored(self):
        # The sidecar added "version" to version 1 of the event (docs/EVENTS.md): a field
        # the feed does not know changes nothing.
        body = {"v": 1, "seq": 1, "path": "team/a.ipynb", "version": "v1.uyaOdTiZchOzRij92wWRyQ",
                "changes": {"added": ["e0"], "removed": [], "moved": [], "cells": {}, "metadata": False}}
        want = ("e0",)
        self.assertEqual(self.announcer.handle(Frame("change", "e-1", json.dumps(body))), [("work", want), ("again", want)])
        self.assertEqual(self.announcer.bad, 0)

    def test_unbound_and_unknown(self):
        self.assertEqual(self.announcer.handle(change("nobody.ipynb", 1)), [])
        self.assertEqual(self.announcer.handle(Frame("change", "x", json.dumps({"v": 2, "path": "b.ipynb"}))), [])
        self.assertEqual(self.announcer.handle(Frame("change", "x", "not json")), [])
        self.assertEqual(self.announcer.handle(Frame("hello", "x", "{}")), [])

    def test_gap_seq_rename_incomplete(self):
        self.assertEqual(self.announcer.handle(Frame("gap", "x", '{"reason":"evicted"}')),
                         [("work", ()), ("again", ()), ("other", ())])
        self.assertEqual(self.announcer.handle(change("b.ipynb", 1, removed=["c1"])), [("other", ("c1",))])
        self.assertEqual(self.announcer.handle(change("b.ipynb", 1, removed=["c1"])), [], "a repeat")
        self.assertEqual(self.announcer.handle(change("b.ipynb", 5, moved=["c2"])), [("other", ())], "a lost seq")
        self.assertEqual(self.announcer.handle(change("b.ipynb", 6, incomplete=True)), [("other", ())])
        renamed = Frame("change", "x", json.dumps({"v": 1, "seq": 1, "path": "c.ipynb", "renamed_from": "b.ipynb", "changes": {}}))
        self.assertEqual(self.announcer.handle(renamed), [("other", ())])

    def test_malformed_events_skipped(self):
        """Each is logged and skipped (counted), and the next valid event is announced."""
        def event(**fields):
            body = {"v": 1, "seq": 1, "path": "b.ipynb", "changes": {"added": [], "removed": [], "moved": [], "cells": {}}}
            body.update(fields)
            return json.dumps(body)

        deep = "[" * 100_000 + "]" * 100_000
        for name, data in [
            ("not JSON", "{"),
            ("nested too deep", deep),
            ("nested too deep in changes", '{"v":1,"seq":1,"path":"b.ipynb","changes":' + deep + "}"),
            ("not an object", "[1]"),
            ("v a string", event(v="1")),
            ("v a boolean", event(v=True)),
            ("seq a string", event(seq="2")),
            ("seq zero", event(seq=0)),
            ("seq a boolean", event(seq=True)),
            ("no path", event(path=None)),
            ("path a number", event(path=5)),
            ("path only slashes", event(path="/./")),
            ("renamed_from a list", event(renamed_from=["a"])),
            ("part a list", event(part=[0, 2])),
            ("changes a list", event(changes=[])),
            ("changes a string", event(changes="x")),
            ("added a string", event(changes={"added": "c1"})),
            ("added numbers", event(changes={"added": [1, 2]})),
            ("added an empty id", event(changes={"added": [""]})),
            ("cells a list", event(changes={"cells": ["c1"]})),
            ("a cell change a string", event(changes={"cells": {"c1": "outputs"}})),
            ("output_indexes strings", event(changes={"cells": {"c1": {"output_indexes": ["x"]}}})),
            ("output_indexes negative", event(changes={"cells": {"c1": {"output_indexes": [-1]}}})),
            ("output_indexes a float", event(changes={"cells": {"c1": {"output_indexes": [1e308]}}})),
            ("output_indexes infinite", event(changes={"cells": {"c1": {"output_indexes": [float("inf")]}}})),
            ("output_indexes an object", event(changes={"cells": {"c1": {"output_indexes": {"0": 1}}}})),
            ("incomplete a string", event(changes={"incomplete": "yes"})),
        ]:
            with self.subTest(name):
                announcer = Announcer(lambda: list(self.bound))
                with self.assertLogs("jupyter_mcp_sidecar_feed.announce", "WARNING") as logs:
                    self.assertEqual(announcer.handle(Frame("change", "bad", data)), [])
                self.assertIn("skipped", logs.output[0])
                self.assertEqual(announcer.bad, 1)
                self.assertEqual(announcer.handle(change("b.ipynb", 1, added=["c1"])), [("other", ("c1",))])
        self.assertEqual(Announcer(lambda: []).handle(Frame("change", "v2", event(v=2))), [], "another version: ignored")

    def test_unbound_names_are_gone(self):
        self.bound = [("other", "b.ipynb")]
        self.assertEqual(self.announcer.handle(change("team/a.ipynb", 1, added=["x"])), [])

    def test_normalize(self):
        for raw, want in [("a.ipynb", "a.ipynb"), ("/a.ipynb", "a.ipynb"), ("./d/../a.ipynb", "a.ipynb"), ("", "")]:
            self.assertEqual(normalize(raw), want)


class Recorder:
    """A JUPYTER_MCP_PUBLISHER_CLASS: what the server's own publishing path hands on."""

    def __init__(self):
        self.uris = []

    async def publish(self, uri):
        self.uris.append(uri)
        return True


class BridgeTest(unittest.TestCase):
    """The bridge on the real jupyter-mcp-server modules: its notebook manager, its
    publish_notebook_updated (with a configured publisher recording the URIs)."""

    def setUp(self):
        self.recorder = Recorder()
        notifications.use_publisher(self.recorder)
        self.addCleanup(notifications.use_publisher, None)
        self.manager = NotebookManager()
        self.manager.add_notebook("work", {}, server_url="http://jupyter", token="t", path="a.ipynb")
        server = SimpleNamespace(mcp=None, notebook_manager=self.manager)
        self.bridge = extension.Bridge("http://127.0.0.1:1/events", TOKEN, server, notifications)
        self.watchers = extension.FeedWatchers(self.bridge)

    def test_frames_published_through_the_server(self):
        async def run():
            self.watchers.watch("work", self.manager)  # a binding: the loop is known
            self.bridge._from_thread(change("a.ipynb", 1, cells={"c1": {"parts": ["outputs"], "output_indexes": [0]}}))
            self.bridge._from_thread(change("other.ipynb", 1, added=["x"]))
            await asyncio.sleep(0.2)
            self.manager.remove_notebook("work")  # unuse_notebook: its binding is gone
            self.bridge._from_thread(change("a.ipynb", 2, added=["y"]))
            await asyncio.sleep(0.2)

        asyncio.run(run())
        self.assertEqual(self.recorder.uris,
                         ["notebook://work", "notebook://work/cells/c1", "notebook://work/cells/c1/outputs/0"])

    def test_announcing_survives_bad_frames_and_failures(self):
        """Malformed frames, the bindings raising and a publish that ends the announcing
        task itself: later frames are still announced, with no tool call in between."""

        class Ended(BaseException):
            """Not an Exception (which publish_notebook_updated swallows): ends the task."""

        class Flaky(Recorder):
            async def publish(self, uri):
                if uri.endswith("/cells/boom"):
                    raise Ended()
                return await super().publish(uri)

        flaky = Flaky()
        notifications.use_publisher(flaky)
        lookup, lookups = self.manager.get_notebook_path, []

        def get_notebook_path(name):
            lookups.append(name)
            if len(lookups) == 2:
                raise RuntimeError("the notebook manager changed under the lookup")
            return lookup(name)

        self.manager.get_notebook_path = get_notebook_path

        async def run():
            self.watchers.watch("work", self.manager)  # a binding: the loop is known, the last attach
            frames_in = [
                Frame("change", "1", '{"v":1,"seq":1,"path":"a.ipynb","changes":[]}'),  # AttributeError before
                Frame("change", "2", '{"v":1,"seq":1,"path":"a.ipynb","changes":{"cells":{"c1":{"output_indexes":["x"]}}}}'),
                Frame("change", "3", "[" * 100_000),  # RecursionError before
                change("a.ipynb", 1, added=["c1"]),
                change("a.ipynb", 2, added=["c2"]),  # the bindings raise
                change("a.ipynb", 3, added=["boom"]),  # the publish raises Ended: the task ends
                change("a.ipynb", 4, added=["c4"]),
            ]
            for frame in frames_in:
                self.bridge._from_thread(frame)
            deadline = time.monotonic() + 30
            while "notebook://work/cells/c4" not in flaky.uris:
                if time.monotonic() > deadline:
                    raise AssertionError(f"not announced after the failures: {flaky.uris}")
                await asyncio.sleep(0.01)

        with mock.patch.object(extension, "FAILURE_BACKOFF", 0.01), self.assertLogs("jupyter_mcp_sidecar_feed", "WARNING"):
            asyncio.run(run())
        self.assertEqual(flaky.uris[:2], ["notebook://work", "notebook://work/cells/c1"])
        self.assertEqual(self.bridge.announcer.bad, 3)
        self.assertEqual((self.bridge.failed, self.bridge.restarts), (1, 1))

    def test_pending_frames_bounded(self):
        """Frames waiting for a busy loop: beyond MAX_PENDING_BYTES, those waiting are
        replaced by one gap (every bound notebook announced whole)."""

        async def run():
            self.watchers.watch("work", self.manager)
            big = "x" * (1 << 20)
            for seq in range(1, 101):  # 100 MB of frames while the loop does nothing else
                self.bridge._enqueue(Frame("change", str(seq), big))
                self.assertLessEqual(self.bridge._pending_bytes, extension.MAX_PENDING_BYTES)
            self.assertLess(self.bridge._queue.qsize(), 100)
            self.bridge._enqueue(change("a.ipynb", 7, added=["c7"]))
            deadline = time.monotonic() + 30
            while "notebook://work/cells/c7" not in self.recorder.uris:
                if time.monotonic() > deadline:
                    raise AssertionError(f"not announced: {self.recorder.uris}")
                await asyncio.sleep(0.01)

        with self.assertLogs("jupyter_mcp_sidecar_feed", "WARNING") as logs:
            asyncio.run(run())
        self.assertTrue(any("overflow" in line for line in logs.output), logs.output)
        self.assertEqual(self.recorder.uris[0], "notebook://work")  # the gap: the notebook whole

    def test_status(self):
        status = self.bridge.status()
        self.assertEqual(status["state"], sse.CONNECTING)
        self.assertEqual(status["url"], "http://127.0.0.1:1/events")

    def test_own_edit_suppressed_only_while_live(self):
        async def run():
            self.bridge.live = False
            down = self.watchers.fold("work", ["c1"])
            self.bridge.live = True
            live = self.watchers.fold("work", ["c1"])
            unbound = self.watchers.fold("nobody", [])
            return down, live, unbound

        self.assertEqual(asyncio.run(run()), (False, True, False))
        self.assertEqual(self.bridge.suppressed, 1)


class StartTest(unittest.TestCase):
    def test_installed_version_fits(self):
        self.assertEqual(compat.check(), [])

    def test_mismatch_names_both_versions(self):
        message = compat.mismatch(compat.check("2.3.1"), "2.3.1")
        self.assertIn("jupyter-mcp-server 2.3.1", message)
        self.assertIn(f"jupyter-mcp-sidecar-feed {compat.own_version()}", message)

    def test_refusals(self):
        env = {extension.URL_ENV: "http://127.0.0.1:1/events", extension.TOKEN_ENV: ""}
        for name, value, want in [
            ("JUPYTER_MCP_WATCH_NOTEBOOKS", "true", "JUPYTER_MCP_WATCH_NOTEBOOKS"),
            ("JUPYTER_MCP_WATCH_NOTEBOOKS", "false", extension.TOKEN_ENV),
        ]:
            saved = {k: os.environ.get(k) for k in [*env, name]}
            os.environ.update(env)
            os.environ[name] = value
            try:
                with self.assertRaises(extension.StartRefused) as refused:
                    extension.start_feed()
                self.assertIn(want, str(refused.exception))
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
        self.assertIsNone(extension.bridge())

    def test_off_without_url(self):
        os.environ.pop(extension.URL_ENV, None)
        self.assertIsNone(extension.start_feed())


if __name__ == "__main__":
    unittest.main()
