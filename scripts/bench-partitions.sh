#!/usr/bin/env bash
# What partitioning the items table by author would cost the reads a page
# makes, on the engines of `scripts/services.sh up` (ARCHITECTURE.md, "Known
# gaps"): the same rows in a plain table keyed by id and in one hash-partitioned
# 16 ways by author (keyed by author and id, as a partitioned table must be),
# then two reads timed on each, one after the other:
#   - by id: 20 items of 20 authors, as a page's records and hydration read them;
#   - by author: one author's 20 newest items, as an outbox read.
# PostgreSQL through pgbench (random ids each time), MariaDB through
# mariadb-slap (a fixed query; rows from MariaDB's sequence engine). Scratch tables in a database of their own,
# dropped at the end.
#
#   scripts/bench-partitions.sh [rows]        (default 1000000)
#   PG=postgres://postgres@127.0.0.1:5432/test MYSQL=root@127.0.0.1:3306 SECONDS_EACH=10
set -euo pipefail
rows="${1:-1000000}"
authors=$((rows / 10))
pg="${PG:-postgres://postgres@127.0.0.1:5432/test}"
my="${MYSQL:-root@127.0.0.1:3306}"
secs="${SECONDS_EACH:-10}"
db=tideway_bench_partitions
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0) printf "x%.2f", b / a; else printf "?" }'; }

if command -v pgbench >/dev/null && psql "$pg" -qAtc 'SELECT 1' >/dev/null 2>&1; then
  psql "$pg" -qc "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
  url="${pg%/*}/$db"
  echo "PostgreSQL: loading $rows items of $authors authors, twice" >&2
  psql "$url" -q >/dev/null <<SQL
CREATE TABLE plain (id BIGINT PRIMARY KEY, author BIGINT NOT NULL, body TEXT NOT NULL);
CREATE INDEX plain_outbox ON plain (author, id);
CREATE TABLE parted (id BIGINT NOT NULL, author BIGINT NOT NULL, body TEXT NOT NULL,
  PRIMARY KEY (author, id)) PARTITION BY HASH (author);
DO \$\$ BEGIN FOR i IN 0..15 LOOP EXECUTE format(
  'CREATE TABLE parted_p%s PARTITION OF parted FOR VALUES WITH (MODULUS 16, REMAINDER %s)', i, i);
END LOOP; END \$\$;
CREATE INDEX parted_id ON parted (id);
INSERT INTO plain SELECT g, g % $authors, repeat('x', 300) FROM generate_series(1, $rows) g;
INSERT INTO parted SELECT g, g % $authors, repeat('x', 300) FROM generate_series(1, $rows) g;
VACUUM ANALYZE plain; VACUUM ANALYZE parted;
SQL
  for t in plain parted; do
    ids=""
    for i in $(seq 0 19); do ids="$ids${ids:+, }:a + $((i * 4999))"; done
    printf '\\set a random(1, %d)\nSELECT id, body FROM %s WHERE id IN (%s);\n' "$((rows - 100000))" "$t" "$ids" \
      >"$work/id-$t.sql"
    printf '\\set a random(1, %d)\nSELECT id FROM %s WHERE author = :a ORDER BY id DESC LIMIT 20;\n' \
      "$((authors - 1))" "$t" >"$work/author-$t.sql"
  done
  declare -A lat
  for q in id author; do
    for t in plain parted; do
      lat[$q-$t]=$(pgbench "$url" -n -M prepared -c 1 -T "$secs" -f "$work/$q-$t.sql" 2>/dev/null |
        awk '/latency average/ { print $4 }')
    done
  done
  echo "PostgreSQL ($(psql "$pg" -qAtc 'SHOW server_version')), $rows items, ms per query (pgbench, 1 client, ${secs} s each):"
  echo "| read | plain table | 16 partitions by author | partitioned / plain |"
  echo "|---|---|---|---|"
  echo "| 20 items by id | ${lat[id-plain]} | ${lat[id-parted]} | $(ratio "${lat[id-plain]}" "${lat[id-parted]}") |"
  echo "| 20 newest of an author | ${lat[author-plain]} | ${lat[author-parted]} | $(ratio "${lat[author-plain]}" "${lat[author-parted]}") |"
  psql "$pg" -qc "DROP DATABASE $db" >/dev/null
else
  echo "PostgreSQL at $pg (or pgbench) not available: skipped" >&2
fi

myhost="${my#*@}"
myuser="${my%@*}"
mysql_args=(-h "${myhost%:*}" -P "${myhost#*:}" -u "$myuser")
if command -v mariadb-slap >/dev/null && mariadb "${mysql_args[@]}" -e 'SELECT 1' >/dev/null 2>&1; then
  echo "MariaDB: loading $rows items of $authors authors, twice" >&2
  mariadb "${mysql_args[@]}" >/dev/null <<SQL
DROP DATABASE IF EXISTS $db; CREATE DATABASE $db; USE $db;
CREATE TABLE plain (id BIGINT NOT NULL PRIMARY KEY, author BIGINT NOT NULL, body LONGTEXT NOT NULL,
  INDEX plain_outbox (author, id)) ENGINE=InnoDB;
CREATE TABLE parted (id BIGINT NOT NULL, author BIGINT NOT NULL, body LONGTEXT NOT NULL,
  PRIMARY KEY (author, id), INDEX parted_id (id)) ENGINE=InnoDB PARTITION BY KEY (author) PARTITIONS 16;
INSERT INTO plain SELECT seq, seq % $authors, REPEAT('x', 300) FROM seq_1_to_$rows;
INSERT INTO parted SELECT * FROM plain;
ANALYZE TABLE plain, parted;
SQL
  # A fixed query, repeated: 20 ids spread over the table, one author.
  ids=""
  for i in $(seq 0 19); do ids="$ids${ids:+, }$((1 + i * (rows / 20)))"; done
  n=$((secs * 1000))
  slap() {
    mariadb-slap "${mysql_args[@]}" --create-schema="$db" --concurrency=1 --iterations=1 \
      --number-of-queries="$n" --query="$1" 2>/dev/null | awk '/Average number of seconds/ { print $(NF - 1) }'
  }
  declare -A my_lat
  for t in plain parted; do
    s=$(slap "SELECT id, body FROM $t WHERE id IN ($ids)")
    my_lat[id-$t]=$(awk -v s="$s" -v n="$n" 'BEGIN { printf "%.3f", s * 1000 / n }')
    s=$(slap "SELECT id FROM $t WHERE author = 4242 ORDER BY id DESC LIMIT 20")
    my_lat[author-$t]=$(awk -v s="$s" -v n="$n" 'BEGIN { printf "%.3f", s * 1000 / n }')
  done
  echo
  echo "MariaDB ($(mariadb "${mysql_args[@]}" -N -e 'SELECT VERSION()')), $rows items, ms per query (mariadb-slap, 1 client, $n queries each):"
  echo "| read | plain table | 16 partitions by author | partitioned / plain |"
  echo "|---|---|---|---|"
  echo "| 20 items by id | ${my_lat[id-plain]} | ${my_lat[id-parted]} | $(ratio "${my_lat[id-plain]}" "${my_lat[id-parted]}") |"
  echo "| 20 newest of an author | ${my_lat[author-plain]} | ${my_lat[author-parted]} | $(ratio "${my_lat[author-plain]}" "${my_lat[author-parted]}") |"
  mariadb "${mysql_args[@]}" -e "DROP DATABASE $db"
else
  echo "MariaDB at $my (or mariadb-slap) not available: skipped" >&2
fi
