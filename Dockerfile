# threshold-bot: the GitHub App server (`threshold-bot serve`), embedded queue and SQLite
# store under /data by default; PostgreSQL (DATABASE_URL=postgresql+psycopg://...) and
# Redis (REDIS_URL) across hosts: deploy/compose.yaml.  Build: docker build -t threshold-bot .
# Run:   docker run -p 3000:3000 -v tb-data:/data -e APP_ID=... -e WEBHOOK_SECRET=... \
#          -e PRIVATE_KEY_PATH=/run/secrets/app.pem ... threshold-bot
# The base image is pinned to an exact Python patch release and Debian release; to pin its
# content too, append the digest (docs/operations.md): FROM python:3.11.14-slim-bookworm@sha256:…
FROM python:3.11.14-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOST=0.0.0.0 \
    PORT=3000 \
    DATABASE_URL=sqlite:////data/threshold-bot.db \
    WANDB_DIR=/data/wandb

WORKDIR /app
# Dependencies first, at the exact versions of constraints.txt: the freeze of a clean install
# of the package with its `all` extra (`make constraints`: the App, W&B, MLflow, PostgreSQL
# and Redis), so code changes reuse this layer (the package itself cannot be built before its
# code is there); setuptools and wheel, pinned there too, build it.
COPY pyproject.toml README.md constraints.txt ./
RUN pip install --no-cache-dir -c constraints.txt -r constraints.txt
# Then the code; the wheel ships the templates (bot.templates). `pip check`: every requirement met.
COPY bot ./bot
COPY templates ./templates
RUN pip install --no-cache-dir --no-deps --no-build-isolation -c constraints.txt . \
    && pip check

RUN useradd --system --uid 10001 --user-group --home-dir /data --create-home threshold-bot
USER threshold-bot
WORKDIR /data
VOLUME ["/data"]
EXPOSE 3000

HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD python -c "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('PORT', '3000'), timeout=4)" || exit 1

CMD ["threshold-bot", "serve"]
