from workspace.culler.app import runtime_notice, site_policy  # moved by the culler branch

__all__ = ["runtime_notice", "site_policy"]  # a stand-in: the lead replaces this file at merge
