#!/usr/bin/env python3
"""Populates a running tideway over HTTP for scripts/bench-http.sh: USERS users
who each follow FOLLOWS others (one batch call each) and POSTS posts of
400-byte bodies by random authors. Deterministic (seeded)."""
import http.client, json, os, random, sys, time

host, port = sys.argv[1], int(sys.argv[2])
users, follows, posts = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rng = random.Random(42)
conn = http.client.HTTPConnection(host, port)

def call(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    conn.request(method, path, body=data, headers={"content-type": "application/json"})
    r = conn.getresponse()
    text = r.read()
    if r.status >= 300:
        sys.exit(f"{method} {path}: {r.status} {text[:200]!r}")
    return text

t = time.time()
for u in range(1, users + 1):
    targets = sorted({str(rng.randint(1, users)) for _ in range(follows)} - {str(u)})
    call("POST", f"/v1/users/{u}/following", {"targets": targets})
text = "x" * 380
ids = []
for i in range(posts):
    item = json.loads(call("POST", "/v1/items", {"author": str(rng.randint(1, users)), "body": {"text": text}}))
    # (tideway answers the entry's item; the seeds' server its id alone)
    ids.append(item["item"]["id"] if "item" in item else item["id"])
# (ITEMS_FILE: the posts' ids, one a line, for scripts/bench/like.lua)
if os.environ.get("ITEMS_FILE"):
    with open(os.environ["ITEMS_FILE"], "w") as f:
        f.write("\n".join(ids) + "\n")
# Every reader reads once, so inboxes exist and pages come from them.
for u in range(1, users + 1):
    call("GET", f"/v1/users/{u}/home?limit=1")
print(f"populated {users} users, ~{users * follows} follows, {posts} posts in {time.time() - t:.1f} s", file=sys.stderr)
