# The sandpit application image for machines with a registry: `sandpit operator` and `sandpit serve`
# in one image (the chart's image, charts/sandpit). The build context is the repository root:
#
#   docker build -f images/app.Dockerfile --build-arg VERSION=0.1.0 -t sandpit/sandpit:0.1.0 .
#   # a mirror of node:20-slim:  --build-arg NODE_IMAGE=registry.example/node:20-slim
#
# Without a registry, images/build-app.sh makes the same layout (/opt/sandpit, tini, uid 1000,
# entry point sandpit) from the cached Debian base and the host's Node.js. This file builds the
# TypeScript itself, so it needs no `npm run build` beforehand.
ARG NODE_IMAGE=node:20-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY src ./src
COPY crds ./crds
COPY charts ./charts
COPY images ./images
COPY scripts/docker-engine.sh ./scripts/docker-engine.sh
COPY README.md ./
# The npm package, as `npm pack` makes it, with the lockfile's production dependencies. No install
# scripts (optional native addons fall back to JavaScript); type declarations and source maps dropped.
RUN npm run build \
  && npm pack --ignore-scripts --pack-destination /tmp \
  && mkdir -p /out \
  && tar -xzf /tmp/sandpit-mcp-*.tgz -C /out \
  && cp package-lock.json /out/package/ \
  && cd /out/package \
  && npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
  && find node_modules -type f \( -name '*.map' -o -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' \) -delete \
  && rm -f package-lock.json node_modules/.package-lock.json

FROM ${NODE_IMAGE}
# tini as PID 1 forwards SIGTERM, so the operator releases its Lease and the gateway drains.
RUN apt-get update \
  && apt-get install -y --no-install-recommends tini \
  && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/package /opt/sandpit
RUN ln -sf /opt/sandpit/dist/cmd/cli.js /usr/local/bin/sandpit
ENV NODE_ENV=production
WORKDIR /opt/sandpit
# uid 1000 (the image's `node` user): what the chart's pods run as, with a read-only root.
USER 1000:1000
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/sandpit"]
CMD ["--help"]
ARG VERSION=dev
LABEL sandpit.dev/managed-by=sandpit \
  sandpit.dev/component=app \
  sandpit.dev/build-hash=dockerfile \
  org.opencontainers.image.title=sandpit \
  org.opencontainers.image.version=${VERSION} \
  org.opencontainers.image.licenses=Apache-2.0
