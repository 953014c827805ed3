"""Which e-mail addresses may sign up (workspace/auth.py); the flow itself is tests/browser/test_signup.py."""

import pytest

from workspace.auth import domain_of, email_allowed


@pytest.mark.parametrize(
    "email, allowed",
    [
        ("ann@uni.example.edu", True),
        ("ann@CS.Uni.Example.EDU", True),
        ("ann@example.edu", False),
        ("ann@evil-uni.example.edu", False),
        ("ann@uni.example.edu.evil.com", False),
        ("uni.example.edu", False),
        ("", False),
        ("ann@other.org", True),
        ("a@b@uni.example.edu", True),
    ],
)
def test_only_the_institutions_domains_and_their_subdomains(email, allowed):
    assert email_allowed(email, ["uni.example.edu", "other.org"]) is allowed


def test_domain_of():
    assert domain_of("x@Y.org ") == "y.org" and domain_of("no-at") == ""
