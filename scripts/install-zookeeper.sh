#!/usr/bin/env bash
# install-zookeeper.sh - make sure the real ZooKeeper the tests start is here:
# java on PATH and Debian's libzookeeper-java jars in /usr/share/java
# (zookeeper.jar, zookeeper-jute.jar, and slf4j-simple.jar from
# libslf4j-java, which it depends on); and Apache Curator's jars from
# libcurator-{recipes,framework,client,discovery}-java (with guava.jar
# and the jackson jars they depend on) for the interop tests, which run
# Curator with java's single-file source launcher (no JDK needed).
#
# Missing and running as root with apt-get: installs
#   libzookeeper-java default-jre-headless libcurator-framework-java
#   libcurator-recipes-java libcurator-client-java libcurator-discovery-java
#   (--no-install-recommends)
# Missing otherwise: says what to install, and fails if ZK_REQUIRED=1
# (without it the tests that need a server are skipped).
set -euo pipefail

jars=(/usr/share/java/zookeeper.jar /usr/share/java/zookeeper-jute.jar /usr/share/java/slf4j-simple.jar
  /usr/share/java/curator-framework.jar /usr/share/java/curator-recipes.jar /usr/share/java/curator-client.jar
  /usr/share/java/guava.jar /usr/share/java/curator-x-discovery.jar /usr/share/java/jackson-databind.jar)
pkgs=(libzookeeper-java default-jre-headless
  libcurator-framework-java libcurator-recipes-java libcurator-client-java libcurator-discovery-java)

missing() { # prints what is missing; false when nothing is
  local out=() j
  command -v java >/dev/null 2>&1 || out+=(java)
  for j in "${jars[@]}"; do [[ -f $j ]] || out+=("$j"); done
  [[ ${#out[@]} -gt 0 ]] && echo "${out[*]}"
}

what=$(missing) || exit 0

if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
  echo "install-zookeeper.sh: missing $what; installing ${pkgs[*]}" >&2
  t0=$(date +%s)
  if DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
     DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null; then
    if what=$(missing); then
      echo "install-zookeeper.sh: still missing after the install: $what" >&2
      exit 1
    fi
    echo "install-zookeeper.sh: installed in $(( $(date +%s) - t0 )) s ($(java -version 2>&1 | head -1))" >&2
    exit 0
  fi
  echo "install-zookeeper.sh: apt-get failed" >&2
  [[ ${ZK_REQUIRED:-} == 1 ]] && exit 1
  echo "install-zookeeper.sh: tests that need a real ZooKeeper will be skipped" >&2
  exit 0
fi

echo "install-zookeeper.sh: missing $what; install it with:" >&2
echo "  sudo apt-get install --no-install-recommends ${pkgs[*]}" >&2
if [[ ${ZK_REQUIRED:-} == 1 ]]; then
  echo "install-zookeeper.sh: ZK_REQUIRED=1, so this is an error" >&2
  exit 1
fi
echo "install-zookeeper.sh: tests that need a real ZooKeeper will be skipped (ZK_REQUIRED=1 makes that an error)" >&2
