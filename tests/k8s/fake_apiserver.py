#!/usr/bin/env python3
"""A stand-in for the Kubernetes API server for the plugin's end-to-end test
(dra_podman_test.sh) and benchmark: what vgpu-kubelet-plugin reads and writes,
over plain HTTP on 127.0.0.1.

    fake_apiserver.py --objects DIR --schema FILE --log FILE --port-file FILE [--token T]

- GET  /apis/resource.k8s.io/v1/namespaces/NS/resourceclaims/NAME and
  GET  /api/v1/namespaces/NS/pods/NAME answer from DIR/*.json (ResourceClaim
  and Pod objects, read again on every request, so the test edits them).
- GET  /apis/resource.k8s.io/v1/resourceslices?fieldSelector=... lists the
  slices written (fieldSelector on spec.nodeName and spec.driver);
  POST creates (metadata.name, or generateName plus a suffix), PUT replaces
  (409 on a stale metadata.resourceVersion), DELETE removes.
- Every slice written is validated against the JSON Schema FILE (the
  resource.k8s.io/v1 subset, tests/k8s/schema): a slice the schema refuses
  gets 422 Invalid, as a real API server's validation would answer. Each
  accepted write is appended to the log as one JSON line
  {"verb", "time", "slice"}.
- A request without "Authorization: Bearer T" gets 401.

What a real API server does and this does not: admission, defaulting,
metadata.generation, watches, pagination, server-side apply.
"""
import argparse
import itertools
import json
import pathlib
import socket
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jsonschema

SLICES = "/apis/resource.k8s.io/v1/resourceslices"


def status(code, reason, message):
    return code, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                  "message": message, "reason": reason, "code": code}


class Store:
    def __init__(self, objects, schema, log):
        self.objects = pathlib.Path(objects)
        doc = json.loads(pathlib.Path(schema).read_text())
        self.validator = jsonschema.validators.validator_for(doc)(doc)
        self.log = open(log, "a", buffering=1)
        self.lock = threading.Lock()
        self.slices = {}
        self.cache = {}
        self.version = itertools.count(5000)
        self.suffix = itertools.count(1)

    def load(self, f):
        """The object in file f, parsed again only when the file changed."""
        try:
            mtime = f.stat().st_mtime_ns
            cached = self.cache.get(f)
            if cached is None or cached[0] != mtime:
                cached = (mtime, json.loads(f.read_text()))
                self.cache[f] = cached
            return cached[1]
        except (OSError, ValueError):
            return None

    def find(self, kind, ns, name):
        for f in sorted(self.objects.glob("*.json")):
            o = self.load(f)
            if not isinstance(o, dict):
                continue
            m = o.get("metadata", {})
            if o.get("kind") == kind and m.get("namespace") == ns and m.get("name") == name:
                return 200, o
        return status(404, "NotFound", f'{kind.lower()}s "{name}" not found')

    def invalid(self, s):
        errors = sorted(self.validator.iter_errors(s), key=lambda e: list(e.path))
        if not errors:
            return None
        e = errors[0]
        return status(422, "Invalid", "ResourceSlice is invalid: " + "/".join(map(str, e.path)) +
                      ": " + e.message)

    def record(self, verb, s):
        self.log.write(json.dumps({"verb": verb, "time": time.time(), "slice": s}) + "\n")

    def stamp(self, s):
        s.setdefault("metadata", {})["resourceVersion"] = str(next(self.version))
        s.setdefault("apiVersion", "resource.k8s.io/v1")
        s.setdefault("kind", "ResourceSlice")

    def list(self, query):
        sel = {}
        for part in query.get("fieldSelector", [""])[0].split(","):
            if "=" in part:
                k, v = part.split("=", 1)
                sel[k] = v
        with self.lock:
            items = [s for s in self.slices.values()
                     if all(s.get("spec", {}).get(k.split(".", 1)[1]) == v for k, v in sel.items())]
            return 200, {"kind": "ResourceSliceList", "apiVersion": "resource.k8s.io/v1",
                         "metadata": {"resourceVersion": str(next(self.version))}, "items": items}

    def create(self, s):
        bad = self.invalid(s)
        if bad:
            return bad
        with self.lock:
            m = s.setdefault("metadata", {})
            if "name" not in m:
                m["name"] = m.pop("generateName", "slice-") + f"{next(self.suffix):05d}"
            if m["name"] in self.slices:
                return status(409, "AlreadyExists", f'resourceslices "{m["name"]}" already exists')
            m["uid"] = f"00000000-0000-4000-8000-{next(self.suffix):012d}"
            self.stamp(s)
            self.slices[m["name"]] = s
            self.record("create", s)
            return 201, s

    def update(self, name, s):
        bad = self.invalid(s)
        if bad:
            return bad
        with self.lock:
            old = self.slices.get(name)
            if old is None:
                return status(404, "NotFound", f'resourceslices "{name}" not found')
            if s.get("metadata", {}).get("resourceVersion") != old["metadata"]["resourceVersion"]:
                return status(409, "Conflict", "the object has been modified; please apply your "
                              "changes to the latest version and try again")
            s["metadata"]["uid"] = old["metadata"]["uid"]
            self.stamp(s)
            self.slices[name] = s
            self.record("update", s)
            return 200, s

    def delete(self, name):
        with self.lock:
            s = self.slices.pop(name, None)
            if s is None:
                return status(404, "NotFound", f'resourceslices "{name}" not found')
            self.record("delete", s)
            return 200, s


def handler(store, token):
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self):
            super().setup()
            # As Go's net/http does: no Nagle delay between headers and body.
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, *args):
            pass

        def reply(self, code, body):
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def body(self):
            n = int(self.headers.get("Content-Length", "0"))
            try:
                return json.loads(self.rfile.read(n) or b"null")
            except ValueError:
                return None

        def route(self, verb):
            if token and self.headers.get("Authorization") != "Bearer " + token:
                return self.reply(*status(401, "Unauthorized", "Unauthorized"))
            url = urllib.parse.urlsplit(self.path)
            parts = url.path.strip("/").split("/")
            if verb == "GET" and len(parts) == 7 and parts[:3] == ["apis", "resource.k8s.io", "v1"] \
                    and parts[5] == "resourceclaims":
                return self.reply(*store.find("ResourceClaim", parts[4], parts[6]))
            if verb == "GET" and len(parts) == 6 and parts[:2] == ["api", "v1"] and parts[4] == "pods":
                return self.reply(*store.find("Pod", parts[3], parts[5]))
            if url.path == SLICES and verb == "GET":
                return self.reply(*store.list(urllib.parse.parse_qs(url.query)))
            if url.path == SLICES and verb == "POST":
                b = self.body()
                return self.reply(*(store.create(b) if isinstance(b, dict) else
                                    status(400, "BadRequest", "not a JSON object")))
            if url.path.startswith(SLICES + "/"):
                name = url.path[len(SLICES) + 1:]
                if verb == "PUT":
                    b = self.body()
                    return self.reply(*(store.update(name, b) if isinstance(b, dict) else
                                        status(400, "BadRequest", "not a JSON object")))
                if verb == "DELETE":
                    return self.reply(*store.delete(name))
            return self.reply(*status(404, "NotFound", "the server could not find the requested "
                                      "resource"))

        def do_GET(self):
            self.route("GET")

        def do_POST(self):
            self.route("POST")

        def do_PUT(self):
            self.route("PUT")

        def do_DELETE(self):
            self.route("DELETE")

    return H


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--objects", required=True)
    p.add_argument("--schema", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--port-file", required=True)
    p.add_argument("--token", default="")
    a = p.parse_args()
    store = Store(a.objects, a.schema, a.log)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler(store, a.token))
    tmp = a.port_file + ".tmp"
    pathlib.Path(tmp).write_text(str(server.server_address[1]))
    pathlib.Path(tmp).rename(a.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
