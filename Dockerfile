# syntax=docker/dockerfile:1
# The tradingsite image: every process of the Procfile runs from it (compose.yaml,
# docs/deployment.md). Python packages come from requirements.txt constrained by
# requirements.lock; the dashboard's chart library from package-lock.json with npm ci
# in a build stage, so neither Node nor node_modules ships in the image.

FROM node:20-slim AS chart-assets
WORKDIR /build
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts --loglevel=error

FROM python:3.11-slim AS app
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VAR_DIR=/app/var \
    DEBUG=0
WORKDIR /app
RUN groupadd --system --gid 10001 tradingsite \
    && useradd --system --uid 10001 --gid tradingsite --home-dir /app --no-create-home tradingsite
COPY requirements.txt requirements.lock ./
RUN pip install -r requirements.txt -c requirements.lock
COPY --chown=tradingsite:tradingsite . .
COPY --from=chart-assets --chown=tradingsite:tradingsite /build/node_modules/lightweight-charts/dist node_modules/lightweight-charts/dist
# Hashed, compressed static files are part of the image (whitenoise serves them with
# DEBUG=0); the key below only lets the settings load for this one command.
RUN SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput -v0 \
    && mkdir -p "$VAR_DIR" && chown -R tradingsite:tradingsite "$VAR_DIR"
USER tradingsite
EXPOSE 8000
# The web process; compose.yaml (and any Procfile runner) gives each service its own command.
CMD ["python", "manage.py", "runweb", "--host", "0.0.0.0", "--port", "8000", "--proxy-headers"]
