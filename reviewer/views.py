from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from reviewer.health import check_database, check_redis, check_worker
from reviewer.models import Domain


def healthz(request: HttpRequest) -> JsonResponse:
    checks = [check_database(), check_redis(), check_worker()]
    healthy = all(check.ok for check in checks)
    body = {"status": "ok" if healthy else "down", **{c.name: c.to_dict() for c in checks}}
    return JsonResponse(body, status=200 if healthy else 503)


@login_required
def session_list(request: HttpRequest) -> HttpResponse:
    return render(request, "reviewer/session_list.html", {"domains": Domain.objects.all()})
