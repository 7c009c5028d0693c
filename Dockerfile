# A Debian 12 image with urnic installed, for CI container jobs (docs/CI.md).
#
#   docker build -t urnic .
#   docker run --rm urnic                                  # urnic doctor
#   docker run --rm urnic urnic run -- ibv_devinfo
#   docker run --rm urnic sh -c 'eval "$(urnic env)"; ibv_rc_pingpong -g 1 & sleep 1; ibv_rc_pingpong -g 1 127.0.0.1'
#
# The first stage builds urnic_<version>_amd64.deb from this tree
# (tools/urnic package); the second installs it into debian:12-slim with the
# usual RDMA programs and runs as an unprivileged user: the default device
# (urnic0, RoCE v2 over UDP on 127.0.0.1) needs no capabilities, devices or
# --privileged. Tested (suite docker, tests/package/dockerfile_test.sh): built
# as it is with buildah from debian:12 images made from Debian's mirror, then
# the three `docker run` lines above run with podman and checked.
FROM debian:12 AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
      build-essential pkg-config meson ninja-build python3 git ca-certificates \
      catch2 libisal-dev libpcap-dev libfmt-dev libcli11-dev nlohmann-json3-dev libboost-dev \
      libnl-route-3-dev libdpdk-dev libibverbs-dev librdmacm-dev \
    && rm -rf /var/lib/apt/lists/*
COPY . /src
WORKDIR /src
RUN tools/package-deb.sh --build /build --out /out   # sets up /build: prefix /usr, release, dpkg-buildflags

FROM debian:12-slim
COPY --from=build /out/ /tmp/urnic-deb/
RUN apt-get update \
    && apt-get install -y --no-install-recommends /tmp/urnic-deb/urnic_*.deb ibverbs-utils rdmacm-utils perftest \
    && rm -rf /var/lib/apt/lists/* /tmp/urnic-deb \
    && useradd --create-home --uid 1000 urnic
USER urnic
WORKDIR /home/urnic
CMD ["urnic", "doctor"]
