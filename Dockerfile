# syntax=docker/dockerfile:1
# layoutd's image, on Node 26, the Active LTS line since 2026-10-28, the
# line the suite runs on (./nodew; test/contrib/dockerfile.test.ts holds the
# two equal). The code needs Node 24+ (package.json engines). Another line:
# docker build --build-arg NODE_IMAGE=node:24-trixie-slim .
ARG NODE_IMAGE=node:26-trixie-slim

# Build: the TypeScript and the C walk (native/walk.c, by node-gyp: python3,
# make and a C compiler, here only), then drops the dev tools. better-sqlite3
# 13 ships its binaries prebuilt in the package (package.json allowScripts
# denies its install script, which would compile it again).
FROM ${NODE_IMAGE} AS build
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*
# The image's node carries its headers (/usr/local/include/node): node-gyp downloads none.
ENV npm_config_nodedir=/usr/local
WORKDIR /app
COPY package.json package-lock.json tsconfig.json binding.gyp ./
COPY native ./native
COPY bin ./bin
COPY src ./src
COPY test ./test
COPY bench ./bench
# The build's last step bundles TypeBox (scripts/after-tsc.mjs).
COPY scripts ./scripts
RUN npm ci && npm prune --omit=dev

# Run: no compiler, not root. /data is the box's data root, /deploy the
# directory deploy store; both are volumes.
FROM ${NODE_IMAGE}
# Loopback only, as everywhere: to listen beyond it, give a token too:
#   -e CARLOS_AGENT_TOKEN=$(openssl rand -hex 32) -e CARLOS_AGENT_LISTEN=0.0.0.0:9740
# The agent refuses an address beyond loopback without one. UV_THREADPOOL_SIZE:
# the fsyncs a converge keeps in flight at once (design §3.3); MALLOC_ARENA_MAX:
# its threads share two malloc arenas, not one each (design §9).
ENV NODE_ENV=production \
    CARLOS_DATA_DIR=/data \
    CARLOS_DEPLOYMENT_DIR=/deploy \
    CARLOS_AGENT_LISTEN=127.0.0.1:9740 \
    UV_THREADPOOL_SIZE=64 \
    MALLOC_ARENA_MAX=2
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist/src ./dist/src
COPY --from=build /app/build/Release/walk.node ./build/Release/walk.node
COPY --from=build /app/bin ./bin
COPY --from=build /app/package.json ./
# `layoutd` on PATH, for `docker exec layoutd layoutd status` and the rest of the CLI.
RUN mkdir -p /data /deploy && chown node:node /data /deploy && ln -s /app/bin/layoutd /usr/local/bin/layoutd
USER node
VOLUME ["/data", "/deploy"]
EXPOSE 9740
# /livez on the address the agent listens on (loopback for a wildcard).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "const l=process.env.CARLOS_AGENT_LISTEN||'127.0.0.1:9740',i=l.lastIndexOf(':');let h=l.slice(0,i);if(h==='0.0.0.0'||h==='[::]')h='127.0.0.1';fetch('http://'+h+':'+l.slice(i+1)+'/livez',{signal:AbortSignal.timeout(4000)}).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# node itself is PID 1: a docker stop's SIGTERM reaches the agent, which
# finishes the host under way and exits (give it --stop-timeout 100).
ENTRYPOINT ["node", "--max-semi-space-size=4", "--heap-growing-percent=100", "dist/src/main.js"]
CMD ["serve"]
