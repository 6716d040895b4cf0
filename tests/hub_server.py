"""A loopback Hub-API server: what `huggingface_hub` (and so `push_to_hub`, `from_pretrained`, `pipeline`) needs to
create a repo, commit files, list a revision and download files. Repositories live in memory; every commit gets a
new 40-hex sha and `main` moves to it. Serves 127.0.0.1 only and stops with the test session."""

import base64
import hashlib
import json
import os
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse

import yaml

REPO = r"(?P<repo>[^/]+(?:/[^/]+)?)"
KIND = r"(?P<kind>models|spaces|datasets)"  # the API's plural; repositories of other kinds are keyed "spaces/ID"
REV = r"(?P<rev>[^/]+)"


class Repo:
    def __init__(self, settings=None):
        self.commits = []  # list of (sha, message, {path: bytes}), newest last
        self.settings = settings or {}  # the create request (type, sdk, private, ...)

    def files(self, rev="main"):
        if not self.commits:
            return None, {}
        if rev in ("main", "HEAD"):
            return self.commits[-1][0], self.commits[-1][2]
        for sha, _, files in self.commits:
            if sha == rev:
                return sha, files
        return None, None


def key(kind, repo_id):
    return repo_id if kind in (None, "models") else f"{kind}/{repo_id}"


class HubState:
    def __init__(self):
        self.repos: dict[str, Repo] = {}
        self.lock = threading.Lock()
        self.log: list[str] = []


def _oid(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


class Handler(BaseHTTPRequestHandler):
    state: HubState = None  # set by `serve`
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet
        pass

    # ------------------------------------------------------------------------------------------------ helpers
    def _send(self, status, body=b"", headers=None, content_type="application/json"):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status, message, code=None):
        headers = {"X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        self._send(status, {"error": message}, headers)

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _repo(self, repo_id, must_exist=True):
        repo = self.state.repos.get(repo_id)
        if repo is None and must_exist:
            self._error(404, f"Repository {repo_id} not found", "RepoNotFound")
        return repo

    def _revision(self, repo_id, rev):
        """(sha, files) of a revision, or None after answering 404 for a missing repository or revision."""
        repo = self._repo(repo_id)
        if repo is None:
            return None
        sha, files = repo.files(rev)
        if files is None:
            self._error(404, f"Revision {rev} not found", "RevisionNotFound")
            return None
        return sha, files

    def _route(self):
        path = unquote(urlparse(self.path).path)
        self.state.log.append(f"{self.command} {path}")
        return path

    # ------------------------------------------------------------------------------------------------ verbs
    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        path = self._route()
        if path == "/api/whoami-v2":
            return self._send(
                200,
                {
                    "type": "user",
                    "name": "tester",
                    "fullname": "Tester",
                    "orgs": [],
                    "auth": {"type": "access_token", "accessToken": {"role": "write"}},
                },
            )
        m = re.fullmatch(rf"/api/{KIND}/{REPO}(?:/revision/{REV})?", path)
        if m:
            return self._model_info(key(m["kind"], m["repo"]), m["rev"] or "main")
        m = re.fullmatch(rf"/api/{KIND}/{REPO}/tree/{REV}(?P<sub>/.*)?", path)
        if m:
            return self._tree(key(m["kind"], m["repo"]), m["rev"], (m["sub"] or "").strip("/"))
        m = re.fullmatch(rf"/api/{KIND}/{REPO}/commits/{REV}", path)
        if m:
            repo = self._repo(key(m["kind"], m["repo"]))
            if repo:
                self._send(
                    200,
                    [
                        {"id": sha, "title": msg, "message": msg, "authors": [], "date": "2026-01-01T00:00:00Z"}
                        for sha, msg, _ in reversed(repo.commits)
                    ],
                )
            return
        m = re.fullmatch(rf"(?:/(?P<kind>spaces|datasets))?/{REPO}/resolve/{REV}/(?P<file>.+)", path)
        if m:
            return self._resolve(key(m["kind"], m["repo"]), m["rev"], m["file"])
        self._error(404, f"no route for GET {path}")

    def do_POST(self):
        path = self._route()
        body = self._body()
        if path == "/api/repos/create":
            payload = json.loads(body or b"{}")
            owner = payload.get("organization")
            repo_id = f"{owner}/{payload['name']}" if owner else payload["name"]
            kind = payload.get("type", "model") + "s"
            if kind == "spaces" and payload.get("sdk") not in ("gradio", "streamlit", "docker", "static"):
                return self._error(400, f"a Space needs an sdk, got {payload.get('sdk')!r}")
            with self.state.lock:
                if key(kind, repo_id) in self.state.repos:
                    return self._send(
                        409,
                        {"error": "You already created this repo", "url": f"http://{self.headers['Host']}/{repo_id}"},
                        {"X-Error-Code": "RepoExists"},
                    )
                self.state.repos[key(kind, repo_id)] = Repo(payload)
            return self._send(200, {"url": f"http://{self.headers['Host']}/{repo_id}", "name": repo_id, "id": repo_id})
        if path == "/api/validate-yaml":  # the card's YAML metadata must parse and be a mapping
            content = json.loads(body)["content"]
            try:
                meta = yaml.safe_load(content.split("---")[1]) if content.startswith("---") else {}
                assert isinstance(meta, dict), "metadata is not a mapping"
            except Exception as e:  # noqa: BLE001 - any parse failure is the client's error
                return self._send(400, {"errors": [{"message": str(e)}]})
            return self._send(200, {"warnings": []})
        m = re.fullmatch(rf"/api/{KIND}/{REPO}/preupload/{REV}", path)
        if m:
            if self._repo(key(m["kind"], m["repo"])) is None:
                return
            files = json.loads(body)["files"]
            return self._send(
                200,
                {
                    "files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files],
                    "commitOid": None,
                },
            )
        m = re.fullmatch(rf"/api/{KIND}/{REPO}/commit/{REV}", path)
        if m:
            return self._commit(key(m["kind"], m["repo"]), m["rev"], body)
        m = re.fullmatch(rf"/api/{KIND}/{REPO}/paths-info/{REV}", path)
        if m:
            found = self._revision(key(m["kind"], m["repo"]), m["rev"])
            if found is None:
                return
            _, files = found
            raw = body.decode()
            wanted = (
                json.loads(raw)["paths"]
                if raw.startswith("{")
                else [unquote(v) for k, v in (p.split("=", 1) for p in raw.split("&") if "=" in p) if k == "paths"]
            )
            return self._send(
                200,
                [
                    {"type": "file", "path": p, "size": len(files[p]), "oid": _oid(files[p])}
                    for p in wanted
                    if p in files
                ],
            )
        self._error(404, f"no route for POST {path}")

    # ------------------------------------------------------------------------------------------------ endpoints
    def _model_info(self, repo_id, rev):
        found = self._revision(repo_id, rev)
        if found is None:
            return
        sha, files = found
        repo_id = re.sub(r"^(spaces|datasets)/", "", repo_id)
        self._send(
            200,
            {
                "id": repo_id,
                "modelId": repo_id,
                "sha": sha,
                "private": False,
                "disabled": False,
                "gated": False,
                "tags": [],
                "downloads": 0,
                "likes": 0,
                "lastModified": "2026-01-01T00:00:00Z",
                "createdAt": "2026-01-01T00:00:00Z",
                "siblings": [{"rfilename": p, "size": len(c)} for p, c in sorted(files.items())],
            },
        )

    def _tree(self, repo_id, rev, sub):
        found = self._revision(repo_id, rev)
        if found is None:
            return
        _, files = found
        entries, dirs = [], set()
        for p, c in sorted(files.items()):
            if sub and not p.startswith(sub + "/"):
                continue
            rest = p[len(sub) + 1 :] if sub else p
            if "/" in rest and "recursive=true" not in self.path.lower():
                dirs.add((sub + "/" if sub else "") + rest.split("/")[0])
                continue
            entries.append({"type": "file", "path": p, "size": len(c), "oid": _oid(c)})
        entries += [{"type": "directory", "path": d, "oid": "0" * 40, "size": 0} for d in sorted(dirs)]
        self._send(200, entries)

    def _commit(self, repo_id, rev, body):
        repo = self._repo(repo_id)
        if repo is None:
            return
        _, files = repo.files(rev)
        files = dict(files or {})
        message = ""
        for line in body.splitlines():
            if not line.strip():
                continue
            item = json.loads(line)
            key, value = item["key"], item["value"]
            if key == "header":
                message = value.get("summary", "")
            elif key == "file":
                files[value["path"]] = base64.b64decode(value["content"])
            elif key == "deletedFile":
                files.pop(value["path"], None)
            elif key == "deletedFolder":
                files = {p: c for p, c in files.items() if not p.startswith(value["path"].rstrip("/") + "/")}
            else:
                return self._error(400, f"unsupported commit operation {key}")
        sha = hashlib.sha1(f"{repo_id}{time.time_ns()}{len(repo.commits)}".encode()).hexdigest()
        with self.state.lock:
            repo.commits.append((sha, message, files))
        host = self.headers["Host"]
        self._send(
            200,
            {
                "commitUrl": f"http://{host}/{repo_id}/commit/{sha}",
                "commitOid": sha,
                "pullRequestUrl": None,
                "success": True,
            },
        )

    def _resolve(self, repo_id, rev, filename):
        found = self._revision(repo_id, rev)
        if found is None:
            return
        sha, files = found
        if filename not in files:
            return self._error(404, f"Entry {filename} not found", "EntryNotFound")
        content = files[filename]
        self._send(
            200, content, {"X-Repo-Commit": sha, "ETag": f'"{_oid(content)}"'}, content_type="application/octet-stream"
        )


def serve() -> tuple[ThreadingHTTPServer, HubState]:
    """Start the server on a free 127.0.0.1 port in a daemon thread; returns (server, state)."""
    state = HubState()
    handler = type("BoundHandler", (Handler,), {"state": state})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, state


def hub_env(endpoint: str, home, token: str = "hf_test_token", **extra) -> dict:
    """A child process's environment that talks to the loopback Hub at `endpoint`: online, with a token, its own
    HF_HOME (cache), no telemetry, no Xet; our package not on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HF_HUB_OFFLINE")}
    env.update(
        HF_ENDPOINT=endpoint,
        HF_TOKEN=token,
        HF_HOME=str(home),
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HUB_DISABLE_XET="1",
        **extra,
    )
    return env
