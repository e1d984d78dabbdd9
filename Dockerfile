# One image for the Dagster code server, webserver and daemon of docker-compose.yml, and for
# every run container (DockerRunLauncher starts runs from the code server's image).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
FROM ${PYTHON_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DAGSTER_HOME=/opt/dagster/home \
    EVAL_PIPELINE_HOME=/var/lib/eval_pipeline \
    DEEPEVAL_TELEMETRY_OPT_OUT=1 \
    DEEPEVAL_DISABLE_DOTENV=1

RUN groupadd --system --gid 10001 eval \
    && useradd --system --uid 10001 --gid eval --no-create-home \
       --home-dir /var/lib/eval_pipeline eval

WORKDIR /opt/eval_pipeline

# Dependencies first, read from pyproject.toml, so a source change does not reinstall them.
# dagster-postgres backs the deployment's storage only, hence not a project dependency; its
# version must follow dagster-docker's (integration versions are core minor + 16).
COPY pyproject.toml ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
       > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt dagster-postgres==0.29.27 \
    && rm /tmp/requirements.txt

COPY . .
# Editable, not a copy into site-packages: the package finds its bundled corpus next to
# itself (eval_pipeline/settings.py), so the checkout layout must stay as it is.
RUN pip install --no-deps --editable . \
    && pip check \
    && mkdir -p "$DAGSTER_HOME" "$EVAL_PIPELINE_HOME" \
    && cp deploy/dagster.yaml deploy/workspace.yaml "$DAGSTER_HOME"/ \
    && chown -R eval:eval "$DAGSTER_HOME" "$EVAL_PIPELINE_HOME"

USER eval
EXPOSE 3000 4000
CMD ["dagster", "code-server", "start", "-m", "eval_pipeline.definitions", "-h", "0.0.0.0", "-p", "4000"]
