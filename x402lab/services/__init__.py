"""The services: gateway catalog and paid routes, media jobs, reports."""
