FROM python:3.11-slim
WORKDIR /app
ENV PYTHONUNBUFFERED=1 CAESURA_DATA_DIR=/data
COPY requirements.txt requirements-vllm.txt ./
RUN pip install --no-cache-dir -r requirements.txt --extra-index-url https://download.pytorch.org/whl/cpu
# The vLLM backend's packages, only when the image is built for it:
#   docker compose build --build-arg CAESURA_BACKEND=vllm   (a GPU image: see docs/backends.md)
ARG CAESURA_BACKEND=transformers
RUN backend=$(printf %s "$CAESURA_BACKEND" | tr -d '[:space:]' | tr '[:upper:]' '[:lower:]'); \
    if [ "$backend" = vllm ]; then pip install --no-cache-dir --no-deps -r requirements-vllm.txt; fi
COPY . .
# The demo data only when asked for (CAESURA_DEMO=1), its logins kept in /data, never printed
# to the logs; behind the TLS proxy (CAESURA_HTTPS=1) the client's address comes from the
# proxy's X-Forwarded-For, so login throttling locks the client, not the proxy. `on` reads a
# switch as the settings do (webapp/env.py env_bool): 1, true, yes or on, in any case.
CMD ["sh", "-c", "on() { case \"$(printf %s \"$1\" | tr -d '[:space:]' | tr '[:upper:]' '[:lower:]')\" in 1|true|yes|on) return 0;; esac; return 1; }; python manage.py prepare_model && python manage.py compile_translations && python manage.py migrate --no-input && if on \"${CAESURA_DEMO:-0}\"; then python manage.py seed_demo --quiet-logins; fi && CAESURA_DB_POOL_SIZE=${CAESURA_DB_POOL_SIZE:-20} exec daphne -b 0.0.0.0 -p 8000 $(on \"${CAESURA_HTTPS:-0}\" && echo --proxy-headers) webapp.asgi:application"]
