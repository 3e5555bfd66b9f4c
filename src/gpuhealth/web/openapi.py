"""The OpenAPI 3.1 document served at /api/v1/openapi.json, written by hand (no framework generates it)."""

from __future__ import annotations

from typing import Any

from gpuhealth.model import ACTIONS, IMPACTS


def _json(description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"description": description,
            "content": {"application/json": {"schema": schema or {"type": "object"}}}}


_ERROR = _json("Error", {"$ref": "#/components/schemas/Error"})
_AUTH = {"401": _json("Token missing or wrong (only when the server was started with a token)",
                      {"$ref": "#/components/schemas/Error"})}


def document(version: str) -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {"title": "gpuhealth serve", "version": version,
                 "description": "Live GPU health of this one machine: readings, alerts and the findings of "
                                "`gpuhealth check`. Read-only apart from POST /api/v1/check (rate-limited). "
                                "Off loopback every path except /, /static/ and /healthz needs the bearer "
                                "token."},
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}],
        "paths": {
            "/api/v1/status": {"get": {
                "summary": "The verdict (HEALTHY, DEGRADED, BROKEN, UNCHECKED, NO DATA) with counts of GPUs and alerts",
                "responses": {"200": _json("Status", {"$ref": "#/components/schemas/Status"}), **_AUTH}}},
            "/api/v1/gpus": {"get": {
                "summary": "Every GPU seen: identity, state (ok, lost, stale), latest readings when answering",
                "responses": {"200": _json("GPUs", {"type": "object", "properties": {
                    "gpus": {"type": "array", "items": {"$ref": "#/components/schemas/Gpu"}}}}), **_AUTH}}},
            "/api/v1/history": {"get": {
                "summary": "A metric's history per GPU as columns (t, v; min and max for per-minute rollups)",
                "parameters": [
                    {"name": "gpu", "in": "query", "schema": {"type": "integer", "minimum": 0},
                     "description": "One GPU (default: every GPU seen)"},
                    {"name": "metric", "in": "query", "schema": {"type": "string"},
                     "description": "A metric or alias (temperature, util, memory, power ...), or several "
                                    "separated by commas (default: the four chart metrics)"},
                    {"name": "range", "in": "query", "schema": {"type": "string", "default": "15m"},
                     "description": "How far back: 15m, 1h, 6h, 24h, 7d, 30d (60 s to 30 days)"}],
                "responses": {"200": _json("Series", {"$ref": "#/components/schemas/History"}),
                              "400": _ERROR, **_AUTH}}},
            "/api/v1/alerts": {"get": {
                "summary": "Active alerts (most severe first) and the recent feed of firing/resolved changes",
                "responses": {"200": _json("Alerts", {"type": "object", "properties": {
                    "active": {"type": "array", "items": {"$ref": "#/components/schemas/Alert"}},
                    "recent": {"type": "array", "items": {"$ref": "#/components/schemas/Alert"}}}}), **_AUTH}}},
            "/api/v1/findings": {"get": {
                "summary": "The last full check: verdict, findings with evidence and fixes, skipped checks",
                "responses": {"200": _json("Findings", {"$ref": "#/components/schemas/Findings"}), **_AUTH}}},
            "/api/v1/check": {"post": {
                "summary": "Run the full check now and wait for it (at most once per rate-limit period)",
                "description": "No request body. 200 with the findings when the run finished in time, 202 "
                               "while it is still running (they arrive on /api/v1/events), 429 with "
                               "Retry-After when called again within the period.",
                "responses": {"200": _json("Findings", {"$ref": "#/components/schemas/Findings"}),
                              "202": _json("Still running", {"$ref": "#/components/schemas/Findings"}),
                              "403": _ERROR, "413": _ERROR, "429": _ERROR, "503": _ERROR, **_AUTH}}},
            "/api/v1/ack": {"post": {
                "summary": "Acknowledge a fault (or clear an acknowledgement): as `gpuhealth ack`",
                "description": "Needs serve started with a token (403 without one: an acknowledgement holds pages "
                               "back) and a history database (503 without). Body: {\"code\": \"GH302\" | "
                               "\"xid:79\" | a rule, \"gpu\": N (optional), \"until\": \"8h\" or an ISO time "
                               "(optional: until cleared), \"reason\": text (required unless clear), \"clear\": "
                               "true (optional)}. The alert is still shown everywhere, as acknowledged.",
                "responses": {"200": _json("The acknowledgements now", {"type": "object"}), "400": _ERROR,
                              "403": _ERROR, "413": _ERROR, "503": _ERROR, **_AUTH}}},
            "/api/v1/events": {"get": {
                "summary": "Server-sent events: status, samples (every interval), alert, findings",
                "responses": {"200": {"description": "text/event-stream; `: keep-alive` comments every 15 s",
                                      "content": {"text/event-stream": {"schema": {"type": "string"}}}},
                              "503": _ERROR, **_AUTH}}},
            "/api/v1/openapi.json": {"get": {"summary": "This document",
                                             "responses": {"200": _json("OpenAPI"), **_AUTH}}},
            "/metrics": {"get": {"summary": "Prometheus exposition, built fresh each scrape (docs/serve.md)",
                                 "responses": {"200": {"description": "text/plain; version=0.0.4",
                                                       "content": {"text/plain": {"schema": {"type": "string"}}}},
                                               **_AUTH}}},
            "/healthz": {"get": {"summary": "Liveness: `ok` (no token needed, no data)", "security": [],
                                 "responses": {"200": {"description": "ok"}}}},
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {"type": "object", "properties": {"error": {"type": "string"}}, "required": ["error"]},
                "Status": {"type": "object", "properties": {
                    "verdict": {"enum": ["HEALTHY", "DEGRADED", "BROKEN", "UNCHECKED", "NO DATA"]},
                    "summary": {"type": "string"}, "time": {"type": "number"},
                    "gpus": {"type": "object"}, "alerts": {"type": "object"}, "check": {"type": "object"},
                    "monitor": {"type": "object"}}},
                "Gpu": {"type": "object", "properties": {
                    "gpu": {"type": "integer"}, "uuid": {"type": "string"}, "pci_bus_id": {"type": "string"},
                    "model": {"type": "string"}, "state": {"enum": ["ok", "lost", "stale", "ended"],
                                                         "description": "ended: a replayed trace ran out"},
                    "last_seen": {"type": ["number", "null"]}, "lost_reason": {"type": "string"},
                    "readings": {"type": "object", "description": "Sample fields that were read (None left out)"},
                    "xids": {"type": "object", "additionalProperties": {"type": "integer"}}}},
                "Alert": {"type": "object", "properties": {
                    "rule": {"type": "string"}, "key": {"type": "string"}, "gpu": {"type": ["integer", "null"]},
                    "severity": {"enum": ["info", "warning", "critical"]}, "state": {"enum": ["firing", "resolved"]},
                    "message": {"type": "string"}, "t": {"type": "number"}, "time": {"type": "string"},
                    "action": {"enum": list(ACTIONS)}, "impact": {"enum": list(IMPACTS)},
                    "capture": {"type": ["string", "null"],
                                "description": "the snapshot bundle captured for the alert's incident"},
                    "acknowledged": {"type": ["object", "null"], "description": "active alerts: the "
                                     "acknowledgement holding its page back (code, gpu, until, reason, t)"}}},
                "History": {"type": "object", "properties": {
                    "range_s": {"type": "number"}, "since": {"type": "number"}, "until": {"type": "number"},
                    "series": {"type": "array", "items": {"type": "object", "properties": {
                        "gpu": {"type": "integer"}, "metric": {"type": "string"},
                        "resolution": {"enum": ["raw", "minute"]},
                        "t": {"type": "array", "items": {"type": "number"}},
                        "v": {"type": "array", "items": {"type": "number"}},
                        "min": {"type": "array", "items": {"type": "number"}},
                        "max": {"type": "array", "items": {"type": "number"}}}}}}},
                "Findings": {"type": "object", "properties": {
                    "checked_at": {"type": ["number", "null"]}, "running": {"type": "boolean"},
                    "error": {"type": ["string", "null"]}, "verdict": {"type": ["string", "null"]},
                    "counts": {"type": ["object", "null"]},
                    "findings": {"type": "array", "items": {"type": "object",
                                                            "description": "As in docs/report-json.md, with "
                                                                           "subject_text and layout (headline, "
                                                                           "rest, facts: the text report's)"}},
                    "skipped": {"type": "array", "items": {"type": "object"}}}},
            },
        },
    }
