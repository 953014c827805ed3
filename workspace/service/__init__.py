"""The workspace service: a JupyterHub service with the REST API and the pages."""
