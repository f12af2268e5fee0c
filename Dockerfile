# syntax=docker/dockerfile:1
# Build: compiles better-sqlite3 and the TypeScript, then drops the dev tools.
FROM node:20-bookworm-slim AS build
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json tsconfig.json ./
COPY bin ./bin
COPY src ./src
COPY test ./test
COPY bench ./bench
RUN npm ci && npm prune --omit=dev

# Run: Node 20 slim, no compiler, not root. /data is the box's data root.
FROM node:20-bookworm-slim
ENV NODE_ENV=production \
    CARLOS_DATA_DIR=/data \
    CARLOS_DEPLOYMENT_DIR=/deploy \
    CARLOS_AGENT_LISTEN=0.0.0.0:9740
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist/src ./dist/src
COPY --from=build /app/bin ./bin
COPY --from=build /app/package.json ./
RUN mkdir -p /data /deploy && chown node:node /data /deploy
USER node
VOLUME ["/data"]
EXPOSE 9740
# Listening beyond loopback needs CARLOS_AGENT_TOKEN: the agent refuses otherwise.
ENTRYPOINT ["node", "dist/src/main.js"]
CMD ["serve"]
