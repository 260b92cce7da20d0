"""A loopback stand-in for the part of the Hugging Face Hub API that huggingface_hub and datasets use, so tests
publish and load dataset versions over real HTTP without reaching huggingface.co.

    with FakeHub(tokens={"hf_write": Token("alice", "write")}) as hub:
        env = {"HF_ENDPOINT": hub.endpoint, "HF_TOKEN": "hf_write", "HF_HUB_DISABLE_XET": "1"}

It speaks the git-LFS transfer, not Xet's chunk storage: give clients HF_HUB_DISABLE_XET=1 so huggingface_hub
sends file contents the LFS way (preupload, LFS batch, PUT, verify, NDJSON commit). A client with Xet left on
is told every file is a regular one (`inline_only`), which drives huggingface_hub's pipelined multi-commit upload
with the contents inline.

Routes (repo types: datasets and models):
- GET /api/whoami-v2; POST /api/repos/create
- GET /api/{type}s/{ns}/{name}[/revision/{rev}]: repo info, with the README's YAML as `cardData`
- POST .../preupload/{rev}; POST /{type}s/{ns}/{name}.git/info/lfs/objects/batch; PUT /_lfs/{ticket}/{oid}
  (a pre-signed URL: no token needed, as with the Hub's storage); POST /_lfs/{ticket}/{oid}/verify
- POST .../commit/{rev} (NDJSON: header, file, lfsFile, deletedFile, deletedFolder)
- POST .../tag/{rev}; DELETE .../tag/{tag}; GET .../refs
- GET .../tree/{rev}[/{path}] (recursive, expand); POST .../paths-info/{rev}
- GET and HEAD /{type}s/{ns}/{name}/resolve/{rev}/{path} (byte ranges; the Hub's metadata headers)

Writing needs a token with role "write" (401 for an unknown token, 403 for a read token); reading needs none.
Every request is recorded (`requests`). Faults: `latency` seconds before each API answer; `slow_uploads_after(n,
seconds)` answers LFS uploads after the n-th only after `seconds` (an interrupted transfer); `swap_on_commit[path]
= data` keeps other contents than those committed (a Hub that lost or changed a file); `fail_next_tag` answers the
next tag request with 503; `go_down_after_uploads(n)` lets n more LFS uploads through, then the network goes: any
later request is never answered (its connection is cut when the server stops) and is not recorded, and once those n
are stored the server stops listening (connections are refused); `come_back()` serves again on the same port with
the same contents.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import secrets
import socket
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import NamedTuple

import yaml
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from tests.fakes.openai_server import ServedInThread, serve_in_thread

LFS_SUFFIXES = (".parquet", ".arrow", ".png", ".jpg", ".jpeg", ".gif", ".webp", ".bin", ".zip", ".gz", ".tar")
LFS_MIN_BYTES = 10 * 1024 * 1024  # the Hub stores larger files in LFS whatever their name
GITATTRIBUTES = "".join(f"*{suffix} filter=lfs diff=lfs merge=lfs -text\n" for suffix in LFS_SUFFIXES)


class Token(NamedTuple):
    user: str
    role: str  # "write" or "read"
    orgs: tuple[str, ...] = ()


@dataclass(frozen=True)
class RecordedRequest:
    """What a client sent: header names lower-cased; body the raw bytes."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Entry:
    """A file in a commit: its git blob id, size and, for an LFS file, the sha256 of the contents."""

    git_oid: str
    size: int
    sha256: str | None = None


@dataclass
class Commit:
    id: str
    parent: str | None
    files: dict[str, Entry]
    title: str
    date: str


@dataclass
class Repo:
    id: str
    type: str
    private: bool
    created: str
    commits: dict[str, Commit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def card_errors(text: str, repo_type: str) -> list[str]:
    """What the Hub's card check objects to, as far as a dataset card's YAML block goes: it must parse to a
    mapping; license a string or a list of them; each of `configs` a config_name with data_files."""
    if not text.startswith("---\n"):
        return []
    if "\n---\n" not in text[4:]:
        return ["the YAML metadata block is not closed"]
    try:
        data = yaml.safe_load(text[4 : text.index("\n---\n", 4)])
    except yaml.YAMLError as error:
        return [f"YAML does not parse: {error}"]
    if data is None:
        return []
    if not isinstance(data, dict):
        return ["metadata must be a mapping"]
    errors = []
    license_value = data.get("license")
    if license_value is not None and not (
        isinstance(license_value, str)
        or (isinstance(license_value, list) and all(isinstance(item, str) for item in license_value))
    ):
        errors.append('"license" must be a string or a list of strings')
    if repo_type == "dataset":
        for config in data.get("configs") or []:
            if not isinstance(config, dict) or not config.get("config_name") or "data_files" not in config:
                errors.append('each entry of "configs" needs "config_name" and "data_files"')
    return errors


class HubError(Exception):
    def __init__(self, status: int, message: str, code: str | None = None, **extra: object):
        super().__init__(message)
        self.status, self.message, self.code, self.extra = status, message, code, extra


class FakeHub(ServedInThread):
    """The stand-in on 127.0.0.1, started at construction; use it as a context manager."""

    def __init__(
        self, tokens: dict[str, Token] | None = None, *, inline_only: bool = False, port: int = 0, latency: float = 0.0
    ):
        self.tokens = dict(tokens or {})
        self.latency = latency  # seconds before each API answer (not storage transfers): a Hub across the internet
        self.inline_only = inline_only  # every file a regular one (no LFS): for clients with Xet on
        self._lock = threading.RLock()
        self._repos: dict[str, Repo] = {}
        self._blobs: dict[str, bytes] = {}  # git blob id -> contents (regular files)
        self._lfs: dict[str, bytes] = {}  # sha256 -> contents (LFS objects)
        self._lfs_in: dict[str, set[str]] = {}  # repo id -> the LFS objects uploaded to it (the Hub's are per repo)
        self._tickets: dict[str, str] = {}  # upload ticket -> repo id
        self._requests: list[RecordedRequest] = []
        self._down_after: int | None = None  # LFS uploads let through before the network goes (None: it stays)
        self._let_through = 0  # of those, the ones that arrived
        self._stored_since = 0  # and were stored
        self._slow_after: tuple[int, float] | None = None
        self.swap_on_commit: dict[str, bytes] = {}  # path -> what the Hub keeps instead of what was committed
        self.fail_next_tag = False  # the next tag request gets a 503 (a Hub failing between commit and tag)
        self._puts_started = 0
        self._stopped = False
        self._app_instance = self._app()
        self._port = port
        self._serve()

    # --- serving -----------------------------------------------------------------------------------------------

    def _serve(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self._port))
        self._port = sock.getsockname()[1]
        self._uvicorn, self._thread = serve_in_thread(self._app_instance, sock, "fake-hub")

    def slow_uploads_after(self, count: int, seconds: float) -> None:
        """LFS uploads after the next `count` take `seconds` before their contents are stored (0: none slow)."""
        with self._lock:
            self._slow_after, self._puts_started = (count, seconds) if seconds else None, 0

    def stored(self, repo_id: str) -> set[str]:
        """The sha256 of the LFS objects the repo has received whole."""
        with self._lock:
            return set(self._lfs_in.get(repo_id, ()))

    def go_down_after_uploads(self, count: int | None) -> None:
        """Let `count` more LFS uploads through, then cut every later request off unanswered, and stop listening
        once those are stored: later connections are refused (None: never)."""
        with self._lock:
            self._down_after, self._let_through, self._stored_since = count, 0, 0

    def _cut_off(self, request: Request) -> bool:
        """Whether the network has gone for this request (call with the lock held): it arrived after the server
        stopped, or it is an LFS upload beyond the ones let through."""
        if self._stopped:
            return True
        if self._down_after is None or request.method != "PUT" or not request.url.path.startswith("/_lfs/"):
            return False
        self._let_through += 1
        return self._let_through > self._down_after

    @property
    def is_down(self) -> bool:
        return self._stopped

    def come_back(self) -> None:
        """Serve again on the same port, with everything stored so far."""
        self._thread.join(timeout=10)
        with self._lock:
            self._stopped, self._down_after = False, None
        self._serve()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    # --- what tests look at --------------------------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    def uploads(self) -> list[str]:
        """The sha256 of every LFS object PUT, in order (the contents a client actually sent)."""
        return [
            request.path.rsplit("/", 1)[1]
            for request in self.requests
            if request.method == "PUT" and request.path.startswith("/_lfs/")
        ]

    def has_repo(self, repo_id: str) -> bool:
        with self._lock:
            return repo_id in self._repos

    def create(self, repo_id: str, repo_type: str = "dataset") -> None:
        """A repo as the Hub creates one (its first commit holds .gitattributes), made here, not over HTTP."""
        with self._lock:
            repo = Repo(repo_id, repo_type, False, _now())
            entry = self._store_regular(GITATTRIBUTES.encode())
            repo.branches["main"] = self._commit(repo, None, {".gitattributes": entry}, "initial commit")
            self._repos[repo_id] = repo

    def refs(self, repo_id: str) -> dict[str, dict[str, str]]:
        with self._lock:
            repo = self._repos[repo_id]
            return {"branches": dict(repo.branches), "tags": dict(repo.tags)}

    def files(self, repo_id: str, revision: str = "main") -> dict[str, bytes]:
        with self._lock:
            repo = self._repos[repo_id]
            commit = repo.commits[self._resolve(repo, revision)]
            return {path: self._contents(entry) for path, entry in commit.files.items()}

    def commit_titles(self, repo_id: str) -> list[str]:
        """The branch main's history, oldest first."""
        with self._lock:
            repo = self._repos[repo_id]
            titles, at = [], repo.branches.get("main")
            while at:
                titles.append(repo.commits[at].title)
                at = repo.commits[at].parent
            return titles[::-1]

    # --- the model -----------------------------------------------------------------------------------------------

    def _contents(self, entry: Entry) -> bytes:
        return self._lfs[entry.sha256] if entry.sha256 else self._blobs[entry.git_oid]

    def _repo(self, repo_type: str, repo_id: str) -> Repo:
        repo = self._repos.get(repo_id)
        if repo is None or repo.type != repo_type:
            raise HubError(404, "Repository not found", "RepoNotFound")
        return repo

    @staticmethod
    def _resolve(repo: Repo, revision: str) -> str:
        if revision in repo.branches:
            return repo.branches[revision]
        if revision in repo.tags:
            return repo.tags[revision]
        if revision in repo.commits:
            return revision
        raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")

    def _commit(self, repo: Repo, parent: str | None, files: dict[str, Entry], title: str) -> str:
        listing = json.dumps([parent, sorted((p, e.git_oid) for p, e in files.items()), title, time.time_ns()])
        commit_id = hashlib.sha1(listing.encode()).hexdigest()
        repo.commits[commit_id] = Commit(commit_id, parent, files, title, _now())
        return commit_id

    def _store_regular(self, data: bytes) -> Entry:
        oid = git_blob_id(data)
        self._blobs[oid] = data
        return Entry(oid, len(data))

    def _user(self, request: Request, write: bool) -> Token | None:
        header = request.headers.get("authorization", "")
        token = header.removeprefix("Bearer ").strip() if header.startswith("Bearer ") else ""
        if not token:
            if write:
                raise HubError(401, "Invalid username or password.")
            return None
        found = self.tokens.get(token)
        if found is None:
            raise HubError(401, "Invalid credentials in Authorization header")
        if write and found.role != "write":
            raise HubError(403, "You don't have the rights to write to this repository: your token is read-only")
        return found

    def _writable(self, request: Request, repo: Repo) -> None:
        user = self._user(request, write=True)
        namespace = repo.id.split("/")[0]
        if namespace != user.user and namespace not in user.orgs:
            raise HubError(403, f"You don't have the rights to write to {repo.id}")

    def _readable(self, request: Request, repo: Repo) -> None:
        user = self._user(request, write=False)
        if repo.private and (user is None or repo.id.split("/")[0] not in (user.user, *user.orgs)):
            raise HubError(404, "Repository not found", "RepoNotFound")

    def _entry_json(self, repo: Repo, path: str, entry: Entry, expand: bool, commit: Commit) -> dict:
        if entry.sha256:
            pointer = lfs_pointer(entry.sha256, entry.size)
            found = {
                "type": "file",
                "oid": git_blob_id(pointer),
                "size": entry.size,
                "path": path,
                "lfs": {"oid": entry.sha256, "size": entry.size, "pointerSize": len(pointer)},
            }
        else:
            found = {"type": "file", "oid": entry.git_oid, "size": entry.size, "path": path}
        if expand:
            found["lastCommit"] = {"id": commit.id, "title": commit.title, "date": commit.date}
        return found

    def _folder_json(self, path: str, commit: Commit, expand: bool) -> dict:
        found = {
            "type": "directory",
            "oid": hashlib.sha1(f"{commit.id}:{path}".encode()).hexdigest(),
            "size": 0,
            "path": path,
        }
        if expand:
            found["lastCommit"] = {"id": commit.id, "title": commit.title, "date": commit.date}
        return found

    def _listing(self, repo: Repo, commit: Commit, prefix: str, recursive: bool, expand: bool) -> list[dict]:
        base = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
        if base and base.rstrip("/") in commit.files:
            return [self._entry_json(repo, base.rstrip("/"), commit.files[base.rstrip("/")], expand, commit)]
        found: dict[str, dict] = {}
        for path, entry in sorted(commit.files.items()):
            if not path.startswith(base):
                continue
            rest = path[len(base) :].split("/")
            for depth in range(1, len(rest)):
                folder = base + "/".join(rest[:depth])
                if recursive or depth == 1:
                    found.setdefault(folder, self._folder_json(folder, commit, expand))
                if not recursive:
                    break
            if recursive or len(rest) == 1:
                found[path] = self._entry_json(repo, path, entry, expand, commit)
        if base and not found:
            raise HubError(404, f"Entry not found: {prefix}", "EntryNotFound")
        return list(found.values())

    def _card_data(self, commit: Commit) -> dict | None:
        entry = commit.files.get("README.md")
        if entry is None:
            return None
        text = self._contents(entry).decode("utf-8")
        if not text.startswith("---\n") or "\n---\n" not in text[4:]:
            return None
        return yaml.safe_load(text[4 : text.index("\n---\n", 4)])

    def _info(self, repo: Repo, commit: Commit) -> dict:
        author = repo.id.split("/")[0]
        return {
            "_id": hashlib.md5(repo.id.encode()).hexdigest()[:24],
            "id": repo.id,
            "author": author,
            "sha": commit.id,
            "lastModified": commit.date,
            "createdAt": repo.created,
            "private": repo.private,
            "disabled": False,
            "gated": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "cardData": self._card_data(commit),
            "siblings": [{"rfilename": p} for p in sorted(commit.files)],
            "usedStorage": sum(entry.size for entry in commit.files.values()),
        }

    def _upload_mode(self, path: str, size: int, sample: bytes) -> str:
        if self.inline_only:
            return "regular"
        return "lfs" if size >= LFS_MIN_BYTES or path.lower().endswith(LFS_SUFFIXES) or b"\0" in sample else "regular"

    # --- the app -------------------------------------------------------------------------------------------------

    def _app(self) -> FastAPI:  # one route table
        app = FastAPI()
        hub = self

        @app.middleware("http")
        async def record(request: Request, call_next):
            body = await request.body()
            with hub._lock:
                cut = hub._cut_off(request)
                if not cut:
                    hub._requests.append(
                        RecordedRequest(
                            request.method,
                            request.url.path,
                            request.url.query,
                            {k.lower(): v for k, v in request.headers.items()},
                            body,
                        )
                    )
            if cut:  # the network is gone: no answer; the server's stop cuts the connection
                await asyncio.sleep(3600)
            if hub.latency and not request.url.path.startswith("/_lfs/"):
                await asyncio.sleep(hub.latency)
            return await call_next(request)

        @app.exception_handler(HubError)
        async def hub_error(request: Request, error: HubError):
            headers = {"X-Error-Message": error.message}
            if error.code:
                headers["X-Error-Code"] = error.code
            return JSONResponse({"error": error.message, **error.extra}, status_code=error.status, headers=headers)

        @app.get("/api/whoami-v2")
        def whoami(request: Request):
            user = hub._user(request, write=False)
            if user is None:
                raise HubError(401, "Invalid username or password.")
            return {
                "type": "user",
                "name": user.user,
                "fullname": user.user,
                "orgs": [{"type": "org", "name": org, "roleInOrg": "write"} for org in user.orgs],
                "auth": {"type": "access_token", "accessToken": {"displayName": "tests", "role": user.role}},
            }

        @app.post("/api/validate-yaml")
        async def validate_yaml(request: Request):
            body = await request.json()
            errors = card_errors(body.get("content", ""), body.get("repoType", "model"))
            return JSONResponse(
                {"errors": [{"message": m} for m in errors], "warnings": []}, status_code=400 if errors else 200
            )

        @app.post("/api/repos/create")
        async def create(request: Request):
            user = hub._user(request, write=True)
            body = await request.json()
            namespace = body.get("organization") or user.user
            repo_id = f"{namespace}/{body['name']}"
            repo_type = body.get("type") or "model"
            if namespace != user.user and namespace not in user.orgs:
                raise HubError(403, f"You don't have the rights to create a {repo_type} under {namespace}")
            with hub._lock:
                if repo_id in hub._repos:
                    raise HubError(
                        409, f"You already created this {repo_type} repo", url=f"{hub.endpoint}/{repo_type}s/{repo_id}"
                    )
                hub.create(repo_id, repo_type)
                hub._repos[repo_id].private = bool(body.get("private"))
            return {"url": f"{hub.endpoint}/{repo_type}s/{repo_id}", "name": repo_id, "id": repo_id}

        def repo_of(request: Request, repo_type: str, namespace: str, name: str, write: bool = False) -> Repo:
            """The repo the route names, if the request may read it (and, with `write`, write to it)."""
            try:
                repo = hub._repo(repo_type.removesuffix("s"), f"{namespace}/{name}")
                hub._readable(request, repo)
            except HubError as error:  # as the Hub: without a token, a missing (or private) repo is a 401
                if error.code == "RepoNotFound" and not request.headers.get("authorization"):
                    raise HubError(401, error.message, error.code) from None
                raise
            if write:
                hub._writable(request, repo)
            return repo

        @app.get("/api/{repo_type}/{namespace}/{name}")
        @app.get("/api/{repo_type}/{namespace}/{name}/revision/{revision}")
        def info(request: Request, repo_type: str, namespace: str, name: str, revision: str = "main"):
            with hub._lock:
                repo = repo_of(request, repo_type, namespace, name)
                return hub._info(repo, repo.commits[hub._resolve(repo, revision)])

        @app.post("/api/{repo_type}/{namespace}/{name}/preupload/{revision}")
        async def preupload(request: Request, repo_type: str, namespace: str, name: str, revision: str):
            body = await request.json()
            with hub._lock:
                repo = repo_of(request, repo_type, namespace, name, write=True)
                head = repo.commits[hub._resolve(repo, revision)]
                files = []
                for item in body["files"]:
                    mode = hub._upload_mode(item["path"], item["size"], base64.b64decode(item["sample"]))
                    answer = {"path": item["path"], "uploadMode": mode, "shouldIgnore": False}
                    existing = head.files.get(item["path"])
                    if existing is not None:
                        answer["oid"] = existing.sha256 if mode == "lfs" and existing.sha256 else existing.git_oid
                    files.append(answer)
                return {"files": files, "commitOid": head.id}

        @app.post("/{repo_type}/{namespace}/{name}.git/info/lfs/objects/batch")
        async def lfs_batch(request: Request, repo_type: str, namespace: str, name: str):
            body = await request.json()
            with hub._lock:
                repo = repo_of(request, repo_type, namespace, name, write=True)
                if body.get("operation") != "upload":
                    raise HubError(400, "only uploads are supported here")
                ticket = secrets.token_hex(8)
                hub._tickets[ticket] = repo.id
                objects = []
                for item in body["objects"]:
                    answer = {"oid": item["oid"], "size": item["size"], "authenticated": True}
                    if item["oid"] not in hub._lfs_in.setdefault(repo.id, set()):
                        href = f"{hub.endpoint}/_lfs/{ticket}/{item['oid']}"
                        answer["actions"] = {
                            "upload": {"href": href, "expires_in": 3600},
                            "verify": {"href": f"{href}/verify", "expires_in": 3600},
                        }
                    objects.append(answer)
            return JSONResponse(
                {"transfer": "basic", "objects": objects, "hash_algo": "sha256"},
                media_type="application/vnd.git-lfs+json",
            )

        @app.put("/_lfs/{ticket}/{oid}")
        async def lfs_put(request: Request, ticket: str, oid: str):
            data = await request.body()
            if ticket not in hub._tickets:
                raise HubError(403, "expired or unknown upload URL")
            if hashlib.sha256(data).hexdigest() != oid:
                raise HubError(400, "the uploaded contents do not match the object id")
            with hub._lock:
                hub._puts_started += 1
                delay = hub._slow_after[1] if hub._slow_after and hub._puts_started > hub._slow_after[0] else 0
            await asyncio.sleep(delay)
            with hub._lock:
                hub._lfs[oid] = data
                hub._lfs_in.setdefault(hub._tickets[ticket], set()).add(oid)
                stop = False
                if hub._down_after is not None:
                    hub._stored_since += 1
                    stop = hub._stored_since >= hub._down_after
                    if stop:
                        hub._stopped = True
            if stop:  # the reply goes out; then the server stops listening
                hub._uvicorn.stop()
            return Response(status_code=200)

        @app.post("/_lfs/{ticket}/{oid}/verify")
        async def lfs_verify(request: Request, ticket: str, oid: str):
            body = await request.json()
            with hub._lock:
                if oid not in hub._lfs or len(hub._lfs[oid]) != body.get("size"):
                    raise HubError(404, f"object {oid} was not uploaded")
            return {"oid": oid}

        @app.post("/api/{repo_type}/{namespace}/{name}/commit/{revision}")
        async def commit(request: Request, repo_type: str, namespace: str, name: str, revision: str):
            lines = [json.loads(line) for line in (await request.body()).splitlines() if line.strip()]
            with hub._lock:
                repo = repo_of(request, repo_type, namespace, name, write=True)
                if revision not in repo.branches:
                    raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")
                head = repo.branches[revision]
                files = dict(repo.commits[head].files)
                title = "commit"
                for line in lines:
                    key, value = line["key"], line["value"]
                    if key == "header":
                        title = value.get("summary") or title
                        parent = value.get("parentCommit")
                        if parent and parent != head:
                            raise HubError(412, "A commit has happened since. Please refresh and try again.")
                    elif key == "file":
                        data = (
                            base64.b64decode(value["content"])
                            if value.get("encoding") == "base64"
                            else value["content"].encode()
                        )
                        files[value["path"]] = hub._store_regular(data)
                    elif key == "lfsFile":
                        if value["oid"] not in hub._lfs_in.get(repo.id, set()):
                            raise HubError(
                                400,
                                f"Your push was rejected because an LFS pointer pointed to a file "
                                f"that does not exist ({value['path']})",
                            )
                        data = hub._lfs[value["oid"]]
                        pointer = lfs_pointer(value["oid"], len(data))
                        files[value["path"]] = Entry(git_blob_id(pointer), len(data), value["oid"])
                    elif key == "deletedFile":
                        if value["path"] not in files:
                            raise HubError(
                                404, f"A file with this name doesn't exist: {value['path']}", "EntryNotFound"
                            )
                        del files[value["path"]]
                    elif key == "deletedFolder":
                        prefix = value["path"].rstrip("/") + "/"
                        files = {p: e for p, e in files.items() if not p.startswith(prefix)}
                    else:
                        raise HubError(400, f"unknown commit line {key!r}")
                for path, data in hub.swap_on_commit.items():
                    if path in files:
                        files[path] = hub._store_regular(data)
                commit_id = hub._commit(repo, head, files, title)
                repo.branches[revision] = commit_id
            return {
                "commitUrl": f"{hub.endpoint}/{repo_type}/{repo.id}/commit/{commit_id}",
                "commitOid": commit_id,
                "success": True,
                "pullRequestUrl": None,
            }

        @app.post("/api/{repo_type}/{namespace}/{name}/tag/{revision}")
        async def create_tag(request: Request, repo_type: str, namespace: str, name: str, revision: str):
            body = await request.json()
            with hub._lock:
                repo = repo_of(request, repo_type, namespace, name, write=True)
                if hub.fail_next_tag:
                    hub.fail_next_tag = False
                    raise HubError(503, "Service Unavailable")
                target = hub._resolve(repo, revision)
                if body["tag"] in repo.tags:
                    raise HubError(409, f"Tag reference refs/tags/{body['tag']} already exists")
                repo.tags[body["tag"]] = target
            return {}

        @app.delete("/api/{repo_type}/{namespace}/{name}/tag/{tag}")
        def delete_tag(request: Request, repo_type: str, namespace: str, name: str, tag: str):
            with hub._lock:
                repo = repo_of(request, repo_type, namespace, name, write=True)
                if repo.tags.pop(tag, None) is None:
                    raise HubError(404, f"Invalid rev id: {tag}", "RevisionNotFound")
            return {}

        @app.get("/api/{repo_type}/{namespace}/{name}/refs")
        def refs(request: Request, repo_type: str, namespace: str, name: str):
            with hub._lock:
                repo = repo_of(request, repo_type, namespace, name)
                return {
                    "branches": [
                        {"name": b, "ref": f"refs/heads/{b}", "targetCommit": c} for b, c in repo.branches.items()
                    ],
                    "tags": [{"name": t, "ref": f"refs/tags/{t}", "targetCommit": c} for t, c in repo.tags.items()],
                    "converts": [],
                }

        @app.get("/api/{repo_type}/{namespace}/{name}/tree/{revision}")
        @app.get("/api/{repo_type}/{namespace}/{name}/tree/{revision}/{path:path}")
        def tree(
            request: Request,
            repo_type: str,
            namespace: str,
            name: str,
            revision: str,
            path: str = "",
            recursive: bool = False,
            expand: bool = False,
        ):
            with hub._lock:
                repo = repo_of(request, repo_type, namespace, name)
                commit_at = repo.commits[hub._resolve(repo, revision)]
                return hub._listing(repo, commit_at, path, recursive, expand)

        @app.post("/api/{repo_type}/{namespace}/{name}/paths-info/{revision}")
        async def paths_info(request: Request, repo_type: str, namespace: str, name: str, revision: str):
            form = await request.form()
            paths = form.getlist("paths")
            expand = str(form.get("expand", "")).lower() in ("1", "true")
            with hub._lock:
                repo = repo_of(request, repo_type, namespace, name)
                commit_at = repo.commits[hub._resolve(repo, revision)]
                found = []
                for path in paths:
                    path = path.strip("/")
                    if path in commit_at.files:
                        found.append(hub._entry_json(repo, path, commit_at.files[path], expand, commit_at))
                    elif any(p.startswith(path + "/") for p in commit_at.files):
                        found.append(hub._folder_json(path, commit_at, expand))
                return found

        @app.api_route("/{repo_type}/{namespace}/{name}/resolve/{revision}/{path:path}", methods=["GET", "HEAD"])
        def resolve(request: Request, repo_type: str, namespace: str, name: str, revision: str, path: str):
            with hub._lock:
                repo = repo_of(request, repo_type, namespace, name)
                commit_id = hub._resolve(repo, revision)
                entry = repo.commits[commit_id].files.get(path)
                if entry is None:
                    raise HubError(404, f"Entry not found: {path}", "EntryNotFound")
                data = hub._contents(entry)
            headers = {
                "X-Repo-Commit": commit_id,
                "Accept-Ranges": "bytes",
                "ETag": f'"{entry.sha256 or entry.git_oid}"',
            }
            if entry.sha256:
                headers.update({"X-Linked-Etag": f'"{entry.sha256}"', "X-Linked-Size": str(entry.size)})
            status = 200
            wanted = request.headers.get("range")
            if wanted and wanted.startswith("bytes="):
                first, _, last = wanted[6:].partition("-")
                start = int(first) if first else max(0, len(data) - int(last))
                end = min(int(last), len(data) - 1) if first and last else len(data) - 1
                headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
                data, status = data[start : end + 1], 206
            if request.method == "HEAD":
                headers["Content-Length"] = str(len(data))
                return Response(status_code=status, headers=headers)
            return Response(data, status_code=status, headers=headers, media_type="application/octet-stream")

        return app


def hub_env(hub: FakeHub, token: str | None) -> dict[str, str]:
    """The environment a `curate` or `python` process needs to talk to the stand-in (Xet off: it speaks LFS)."""
    return {
        "HF_ENDPOINT": hub.endpoint,
        "HF_TOKEN": token or "",
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_OFFLINE": "0",
        "HF_DATASETS_OFFLINE": "0",
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }
