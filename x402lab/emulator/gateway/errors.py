"""The gateway's error answers: JSON ``{"error": code, "message": ..., "hint"?: ...}``.

Handlers raise ``GatewayError``; the app turns it into the JSON answer in one place. Codes:

    400 invalid_json, invalid_request       the body is not what the route takes
    400 model_required, model_not_found,    the model field (a 400 with a hint, never a 402,
        model_unpriced, model_wrong_type    and never a substituted model)
    400 quote_rejected                      music/video parameters outside the model's limits
    400 charge_exceeds_max                  the computed charge is above maxChargeUsd
    400 unsupported_method                  a JSON-RPC method the proxy does not carry
    404 not_found, unknown_network,         unknown path, character, network or queue_id
        job_not_found, media_deleted
    409 job_processing                      complete on a job that is still running
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse


class GatewayError(Exception):
    """An error answer of the gateway (status, code, message, optional hint and extra fields)."""

    def __init__(
        self, status: int, code: str, message: str, *, hint: str | None = None, **extra: Any
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.hint = hint
        self.extra = extra

    def to_body(self) -> dict[str, Any]:
        """The JSON body of this error."""
        body: dict[str, Any] = {"error": self.code, "message": self.message}
        if self.hint:
            body["hint"] = self.hint
        body.update(self.extra)
        return body

    def response(self) -> JSONResponse:
        """This error as a JSON response."""
        return JSONResponse(self.to_body(), status_code=self.status)


def bad_request(
    message: str, *, hint: str | None = None, code: str = "invalid_request"
) -> GatewayError:
    """A 400 ``invalid_request`` (or ``code``) error."""
    return GatewayError(400, code, message, hint=hint)
