#!/usr/bin/env bash
# Build (if needed) and run a real single-node OpenSearch 2.19 on 127.0.0.1.
#
#   tools/opensearch-local/run.sh [--port N] [--data DIR] [--transport-port N] [--no-parent-watch]
#   tools/opensearch-local/run.sh --build-only
#
# --port 0 picks a free port; the node prints "OPENSEARCH_READY http://127.0.0.1:PORT"
# on stdout once the cluster is yellow/green (logs and build output go to stderr).
# Without --data (or OPENSEARCH_DATA_DIR) the data is thrown away on exit.
# Extra JVM options: OPENSEARCH_JAVA_OPTS (appended, so they win).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# No cd: relative --data paths are the caller's.

java_bin="java"
if [[ -n "${JAVA_HOME:-}" && -x "${JAVA_HOME}/bin/java" ]]; then
    java_bin="${JAVA_HOME}/bin/java"
fi

# Fingerprint of everything the build depends on; the build is skipped while
# it matches the one recorded after the last successful build.
fingerprint() {
    (cd "$here" && { cat pom.xml; find src -type f | LC_ALL=C sort | xargs cat; } | cksum)
}

is_built() {
    [[ -f "$here/target/.build-stamp" ]] \
        && [[ "$(cat "$here/target/.build-stamp")" == "$(fingerprint)" ]] \
        && compgen -G "$here/target/lib/opensearch-knn-*.jar" >/dev/null \
        && [[ -f "$here/target/classes/dev/kb/opensearchlocal/LocalOpenSearch.class" ]]
}

build() {
    command -v mvn >/dev/null || { echo "opensearch-local: mvn (Maven 3.8+) not found" >&2; exit 127; }
    echo "opensearch-local: building (mvn package, first run downloads ~85 MB into ~/.m2) ..." >&2
    rm -f "$here/target/.build-stamp"
    # A stale lib/ (e.g. after a version bump) would put two versions on the classpath.
    rm -rf "$here/target/lib" "$here/target/dependency-maven-plugin-markers"
    # Offline first (everything cached in ~/.m2), then online. mvn's stdout goes
    # to stderr: stdout is reserved for the ready line.
    if ! (cd "$here" && mvn -q -o -DskipTests package) >/dev/null 2>&1; then
        (cd "$here" && mvn -q -DskipTests package) 1>&2
    fi
    if ! compgen -G "$here/target/lib/opensearch-knn-*.jar" >/dev/null; then
        echo "opensearch-local: build finished but target/lib has no opensearch-knn jar" >&2
        exit 1
    fi
    fingerprint > "$here/target/.build-stamp"
}

ensure_built() {
    if is_built; then
        return
    fi
    mkdir -p "$here/target"
    if command -v flock >/dev/null; then
        # Concurrent callers (two test sessions, make + pytest) build once.
        exec 9>"$here/target/.build-lock"
        flock 9
        is_built || build
        flock -u 9
        exec 9>&-
    else
        build
    fi
}

if [[ "${1:-}" == "--build-only" ]]; then
    ensure_built
    exit 0
fi

ensure_built

jvm_opts=(
    -Xms512m -Xmx1g
    -XX:+UseG1GC
    -XX:+ExitOnOutOfMemoryError
    -Djava.awt.headless=true
    -Dfile.encoding=UTF-8
    -Dopensearch.set.netty.runtime.available.processors=false
    -Dlog4j2.disable.jmx=true
)
# shellcheck disable=SC2206  # word splitting of the user's options is intended
extra_opts=(${OPENSEARCH_JAVA_OPTS:-})

exec "$java_bin" "${jvm_opts[@]}" ${extra_opts[@]+"${extra_opts[@]}"} \
    -cp "$here/target/classes:$here/target/lib/*" \
    dev.kb.opensearchlocal.LocalOpenSearch "$@"
