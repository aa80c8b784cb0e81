# The Peloton-C image: the release binaries (pelotond, peloton-extender,
# peloton-sim, kubelet-sim) on Debian bookworm. `make image` builds it with
# docker, podman or buildah (docs/extender.md, "The image"); the manifests
# (manifests/extender-deployment.yaml) name the tag it builds.
#
# Stage 1 builds the binaries as on a developer's machine (scripts/deps.sh
# installs the build packages, then make); stage 2 holds the binaries and the
# Debian packages of the libraries they load (scripts/runtime-packages.sh),
# and runs as an unprivileged user.
FROM debian:bookworm AS build
ENV DEBIAN_FRONTEND=noninteractive
WORKDIR /src
COPY . .
RUN scripts/deps.sh \
 && make -s -j"$(nproc)" build \
 && scripts/runtime-packages.sh bin/* > /src/runtime-packages

FROM debian:bookworm-slim
ENV DEBIAN_FRONTEND=noninteractive
COPY --from=build /src/runtime-packages /tmp/runtime-packages
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends ca-certificates $(cat /tmp/runtime-packages) \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages
COPY --from=build /src/bin/ /usr/local/bin/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/peloton-extender"]
