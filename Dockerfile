# The read-only Legi-Val app: the pages on the bundled stores (or yours), nothing else.
#   docker build -t legival-app . && docker run -p 8501:8501 legival-app
# Also the recipe of a Hugging Face Docker Space (deploy/docker-space/README.md is its card).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Hugging Face runs a Space's container as uid 1000; use the same user everywhere.
RUN useradd --create-home --uid 1000 app
WORKDIR /home/app/legival

# Only what the hosted pages need: no torch, no models, no compiler (requirements-app.txt).
COPY requirements-app.txt .
RUN pip install -r requirements-app.txt

COPY --chown=app:app app.py ./
# Beside app.py: the server starts with its menu hidden until app.py has declared its pages.
COPY --chown=app:app .streamlit/ .streamlit/
COPY --chown=app:app pages/ pages/
COPY --chown=app:app legival_core/ legival_core/
COPY --chown=app:app results/ results/
USER app

# Hosting mode: only the configured stores, no paths shown, nothing written. Serve a store of
# your own by copying it under results/ and setting LEGIVAL_STORE=results/<name>.
ENV LEGIVAL_READONLY=1 \
    STREAMLIT_SERVER_HEADLESS=true \
    STREAMLIT_BROWSER_GATHER_USAGE_STATS=false
EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4).status != 200)"]
CMD ["streamlit", "run", "app.py", "--server.port=8501", "--server.address=0.0.0.0", "--", "--readonly"]
