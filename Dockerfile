# llmgw in a container: docker build -t llmgw . (docs/releases.md).
# The binary is built as scripts/release builds it (the same flags;
# dockerfile_test.go compares them); the final image is FROM scratch:
# no shell, no package manager, only llmgw, CA certificates and a
# non-root user.
#
#   docker build --build-arg VERSION=v0.16.0 --build-arg COMMIT=$(git rev-parse HEAD) -t llmgw:v0.16.0 .
#   docker run -p 8080:8080 -v llmgw-data:/data -v $PWD/Caddyfile:/etc/llmgw/Caddyfile:ro llmgw:v0.16.0

FROM golang:1.26-bookworm AS build
ARG VERSION=devel
ARG COMMIT=
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
	-ldflags="-s -w -buildid= -X github.com/llmgw/llmgw/modules/internal/buildinfo.version=${VERSION} -X github.com/llmgw/llmgw/modules/internal/buildinfo.commit=${COMMIT}" \
	-o /out/llmgw ./cmd/llmgw
# The user the final image runs as, and its data and config directories.
RUN echo 'llmgw:x:10001:10001:llmgw:/data:/nonexistent' >/out/passwd \
	&& echo 'llmgw:x:10001:' >/out/group \
	&& mkdir -p /out/data /out/config \
	&& cp /src/Caddyfile.example /out/config/Caddyfile

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/passwd /etc/passwd
COPY --from=build /out/group /etc/group
COPY --from=build --chown=10001:10001 /out/data /data
COPY --from=build /out/config /etc/llmgw
COPY --from=build /out/llmgw /usr/bin/llmgw
# Caddy keeps its data (certificates, llmgw's state) under XDG_DATA_HOME
# and its autosaved config under XDG_CONFIG_HOME.
ENV XDG_DATA_HOME=/data XDG_CONFIG_HOME=/data/config HOME=/data
USER 10001:10001
VOLUME /data
EXPOSE 8080
ENTRYPOINT ["/usr/bin/llmgw"]
CMD ["run", "--config", "/etc/llmgw/Caddyfile"]
