"""The workspace service: a JupyterHub service with the REST API and the pages.

Owns: the Application (`app`, `python -m workspace.service`: its stores, settings and
routes, built once), the handlers' base (`api`: who calls, whose objects, the JSON answer),
one `*_api` module per resource of the REST API (openapi.yaml), the pages' base (`pages`)
and one `*_page` module per page, and the followed log streams (`streams`). Handlers parse,
call one domain function and answer; the rules live below.

May import: what is below it (the spawner's options and form, the flows, `limits`, `store`,
the records, the ground). Never imports the culler or the gateway, and nothing imports it
(docs/architecture.md, layer 2).
"""
