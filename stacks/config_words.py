"""What each pattern a config key must match means, in words with an example.

pydantic refuses a string that misses its pattern with the raw regex ("String should match
pattern '^[a-z_][a-z0-9_-]{0,31}$'"), which tells a person nothing. ``config_errors.problems``
says the words below instead; tests/unit/test_config_words.py walks every model and fails on a
pattern that has no words here, so a new pattern cannot bring the regex back.
"""

from __future__ import annotations

PATTERN_WORDS = {
    r"^[a-z][a-z0-9-]{0,62}$": "a host name is lower-case letters, digits or '-', starting with a letter, "
    "at most 63 characters (e.g. gpu01)",
    r"^[a-z_][a-z0-9_-]{0,31}$": "a login, group or Slurm account name is lower-case letters, digits, '-' or '_', "
    "starting with a letter or '_', at most 32 characters (e.g. nlp-lab)",
    r"^[a-z0-9_]+$": "a GRES type is lower-case letters, digits or '_' (e.g. h100)",
    r"^[a-zA-Z0-9._-]{1,15}$": "a network interface name is letters, digits, '.', '_' or '-', "
    "at most 15 characters (e.g. eno1)",
    r"^[a-z][a-z0-9_-]{0,31}$": "a Slurm account or QoS name is lower-case letters, digits, '-' or '_', "
    "starting with a letter, at most 32 characters (e.g. normal)",
    r"^/[A-Za-z0-9._/-]*$": "an absolute path of letters, digits, '.', '_', '-' and '/' (e.g. /srv/gluster/brick1)",
    r"^[a-z][a-z0-9_]{0,39}$": "a Slurm cluster name is lower-case letters, digits or '_', starting with a letter, "
    "at most 40 characters (e.g. hpc)",
    r"^[a-z][a-z0-9_]{0,31}$": "a partition name is lower-case letters, digits or '_', starting with a letter, "
    "at most 32 characters (e.g. gpu)",
    r"^(INFINITE|UNLIMITED|\d+(-\d{1,2})?(:\d{2}){0,2})$": "a Slurm time limit is minutes, hours:minutes:seconds "
    "or days-hours[:minutes[:seconds]], or UNLIMITED (e.g. 2-00:00:00)",
    r"^[a-z0-9.-]+(:\d+)?(/[a-z0-9._-]+)*$": "a registry is host[:port][/path] in lower case, without a scheme "
    "(e.g. registry.lab:5000)",
    r"^v1\.(\d+)\.\d+\+k3s\d+$": "a k3s release is v1.MINOR.PATCH+k3sN (e.g. v1.31.4+k3s1)",
    r"^[a-z][a-z0-9-]{0,40}$": "a model name is lower-case letters, digits or '-', starting with a letter, "
    "at most 41 characters (e.g. llama-8b)",
    r"^[A-Za-z0-9._-]+/[A-Za-z0-9._-]+$": "a Hugging Face repository id is owner/name "
    "(e.g. meta-llama/Llama-3.1-8B-Instruct)",
    r"^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$": "a DNS name in lower case, without a scheme or port "
    "(e.g. llm.example.org)",
    r"^[1-9][0-9]*[sm]$": "a Prometheus interval is a whole number of seconds or minutes (e.g. 30s or 1m)",
    r"^[1-9][0-9]*[hdwy]$": "a retention is a whole number of hours, days, weeks or years (e.g. 30d)",
    r"^ldaps?://[A-Za-z0-9.\-\[\]:]+(:\d{1,5})?/?$": "an LDAP URI is ldap://host[:port] or ldaps://host[:port] "
    "(e.g. ldaps://ldap.example.org)",
    r"^[A-Za-z][A-Za-z0-9-]*=[^,=]+(,\s*[A-Za-z][A-Za-z0-9-]*=[^,=]+)*$": "a distinguished name is "
    "attribute=value pairs joined by ',' (e.g. ou=people,dc=example,dc=org)",
    r"^[A-Za-z][A-Za-z0-9-]*$": "an LDAP attribute name is letters, digits or '-', starting with a letter "
    "(e.g. sshPublicKey)",
    r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$": "a directory group name is letters, digits, '.', '_' or '-', "
    "not starting with '.' or '-', at most 64 characters (e.g. hpc-users)",
}


def pattern_words(pattern: str) -> str:
    """The words for ``pattern``; a pattern without words still never shows its regex."""
    return PATTERN_WORDS.get(pattern, "not in the expected form (see this key in the README's configuration reference)")
