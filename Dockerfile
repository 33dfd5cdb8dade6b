FROM python:3.11-slim
WORKDIR /app
ENV PYTHONUNBUFFERED=1 CAESURA_DATA_DIR=/data
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt --extra-index-url https://download.pytorch.org/whl/cpu
COPY . .
CMD ["sh", "-c", "python manage.py prepare_model && python manage.py compile_translations && python manage.py migrate --no-input && python manage.py seed_demo && daphne -b 0.0.0.0 -p 8000 webapp.asgi:application"]
