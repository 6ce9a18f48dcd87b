"""Find, in a command line of wget, curl, yt-dlp or git, the options that Vellum watches.

Two readers use it: redaction.py (which values are credentials, to hide them) and the start-up
check of EXTRACTOR_OPTIONS in core/checks.py (which options would take a tool around the egress
proxy, to refuse them). Each tool's line is read as the tool's own parser reads it, so that no
spelling the tool accepts slips past:

- long options: ``--name value`` and ``--name=value`` (curl has no ``=`` form, but a value
  written so is treated as one, erring on the side of hiding). Every one of these tools also
  accepts an unambiguous prefix of a long option (GNU getopt_long for wget, curl 7.88's own
  parser, Python's optparse for yt-dlp, git's parse-options), so a prefix of a watched option
  counts as that option unless it is another option of the tool in full (curl's ``--head`` is
  not ``--header``). A prefix of several watched options of different kinds, which the tool
  refuses as ambiguous, counts as a secret;
- short options cluster (``-sH value``, ``-sHvalue``, ``-su user:pass``): a letter that takes a
  value takes the rest of the argument, or the next argument when nothing follows it. The
  letters that take a value are each tool's own (``--help``): a letter left out would only make
  more of the line be read as options, never less.

Option tables are those of wget 1.21, curl 7.88, yt-dlp 2026.10 and git 2.39 ``clone``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

# What a watched option's value holds.
HEADER = "header"  # "Name: value"; the name stays
SECRET = "secret"  # a credential, whole
USER = "user"  # "user:password"; the user name stays
CONFIG = "config"  # git's "key=value"
COMMAND = "command"  # a wgetrc command, "name = value" (wget's --execute)
PROXY = "proxy"  # sets, replaces or switches off the proxy, or reads a file that may

# An option written "--name=value" whose name says it holds a credential, in any tool.
SECRET_NAME = re.compile(r"passw|token|secret|api-?key|bearer", re.IGNORECASE)

# wgetrc commands are matched without case, "-" or "_" (wget's init.c, command_by_name).
WGETRC_KINDS = {
    "header": HEADER,
    "password": SECRET,
    "httppassword": SECRET,
    "httppasswd": SECRET,
    "ftppassword": SECRET,
    "ftppasswd": SECRET,
    "proxypassword": SECRET,
    "proxypasswd": SECRET,
    "user": USER,
    "httpuser": USER,
    "ftpuser": USER,
    "proxyuser": USER,
    "useproxy": PROXY,
    "httpproxy": PROXY,
    "httpsproxy": PROXY,
    "ftpproxy": PROXY,
    "noproxy": PROXY,
}
# git config keys (lowercased: sections and names are case-insensitive, git-config(1)) that set
# or switch off a proxy (an empty http.proxy disables the environment's), or pull in a file that
# may: http.proxy, http.<url>.proxy, remote.<name>.proxy, include.path, includeIf.<cond>.path.
GIT_PROXY_KEY = re.compile(r"http(?:\..+)?\.proxy|remote\..+\.proxy|include(?:if\..+)?\.path")


@dataclass(frozen=True)
class Syntax:
    """How one tool spells the options Vellum watches.

    ``long`` maps each watched long option to its kind; ``flags`` are those that take no value;
    ``short`` maps a short option letter to the long option it stands for; ``valued`` lists
    every short letter that takes a value; ``whole`` names the tool's other options that are
    prefixes of watched ones (so not abbreviations of them).
    """

    long: dict[str, str]
    flags: frozenset[str] = frozenset()
    short: dict[str, str] = field(default_factory=dict)
    valued: str = ""
    whole: frozenset[str] = frozenset()
    abbreviations: bool = True

    def resolve(self, name: str) -> tuple[str, ...]:
        """Return the watched long options ``name`` ("--http-pass") may stand for."""
        if name in self.long:
            return (name,)
        if not self.abbreviations or name in self.whole or len(name) < 3:
            return ()
        return tuple(option for option in self.long if option.startswith(name))


def _table(**options: str) -> dict[str, str]:
    """Return {long option: kind} from the space-separated options given for each kind."""
    return {name: kind for kind, names in options.items() for name in names.split()}


SYNTAX = {
    "wget": Syntax(
        long=_table(
            header="--header",
            secret="--password --http-password --http-passwd --ftp-password --ftp-passwd "
            "--proxy-password --proxy-passwd",
            user="--user --http-user --ftp-user --proxy-user",
            command="--execute",
            proxy="--no-proxy --config",
        ),
        flags=frozenset({"--no-proxy"}),
        short={"e": "--execute"},
        valued="ABDIOPQRTUXaeilotw",
    ),
    "curl": Syntax(
        long=_table(
            header="--header --proxy-header",
            secret="--pass --proxy-pass --cookie --oauth2-bearer --netrc-file --tlspassword "
            "--proxy-tlspassword --cert --proxy-cert",
            user="--user --proxy-user",
            proxy="--proxy --proxy1.0 --socks4 --socks4a --socks5 --socks5-hostname --preproxy "
            "--noproxy --config --unix-socket --abstract-unix-socket",
        ),
        short=dict(
            H="--header",
            u="--user",
            U="--proxy-user",
            b="--cookie",
            E="--cert",
            x="--proxy",
            K="--config",
        ),
        valued="ACDEFHKPQTUXYbcdemortuwxyz",
        whole=frozenset({"--head", "--netrc"}),
    ),
    "yt-dlp": Syntax(
        long=_table(
            header="--add-header --add-headers",
            secret="--password --video-password --ap-password --twofactor "
            "--client-certificate-password",
            proxy="--proxy --geo-verification-proxy --cn-verification-proxy --config-locations",
        ),
        short={"p": "--password", "2": "--twofactor"},
        valued="2INOPRSafoprtu",
        whole=frozenset({"--client-certificate"}),
    ),
    "git": Syntax(long={"--config": CONFIG}, short={"c": "--config"}, valued="bcjou"),
}
# A program Vellum does not know: the long options of every tool, in full only.
GENERIC = Syntax(
    long={
        name: kind
        for syntax in SYNTAX.values()
        for name, kind in syntax.long.items()
        if kind in (HEADER, SECRET, USER)
    },
    abbreviations=False,
)


@dataclass(frozen=True)
class Option:
    """One watched option found on a command line.

    ``names`` are the watched long options it may stand for (one, unless an ambiguous prefix)
    and ``kinds`` what their values hold; ``written`` is how the line spells it ("--http-pass",
    "-sH"). Its value is ``args[index][start:]`` (None when it takes none, or the line ends
    first).
    """

    names: tuple[str, ...]
    kinds: frozenset[str]
    written: str
    index: int
    start: int
    value: str | None

    @property
    def kind(self) -> str:
        """What the value holds: the one kind, or SECRET for a prefix of several kinds."""
        return next(iter(self.kinds)) if len(self.kinds) == 1 else SECRET


def find_options(args: Sequence[str], tool: str | None) -> Iterator[Option]:
    """Yield the watched options of ``args`` (a command line, or only its arguments) as
    ``tool`` ("wget", "curl", "yt-dlp", "git"; another name or None: GENERIC) reads it."""
    syntax = SYNTAX.get(tool or "", GENERIC)
    index = 0
    while index < len(args):
        arg = args[index]
        if arg.startswith("--") and len(arg) > 2:
            option = _long_option(syntax, args, index)
        elif arg.startswith("-") and len(arg) > 1:
            option = _short_option(syntax, args, index)
        else:
            option = None
        if option is not None:
            yield option
            index = max(index, option.index)
        index += 1


def _long_option(syntax: Syntax, args: Sequence[str], index: int) -> Option | None:
    """The watched option ``args[index]`` ("--name" or "--name=value") is, if any."""
    arg = args[index]
    name, equals, value = arg.partition("=")
    names = syntax.resolve(name)
    if not names:
        if equals and SECRET_NAME.search(name):
            return Option((name,), frozenset({SECRET}), name, index, len(name) + 1, value)
        return None
    kinds = frozenset(syntax.long[option] for option in names)
    if all(option in syntax.flags for option in names):
        return Option(names, kinds, name, index, len(arg), None)
    if equals:
        return Option(names, kinds, name, index, len(name) + 1, value)
    return _value_after(names, kinds, name, args, index)


def _short_option(syntax: Syntax, args: Sequence[str], index: int) -> Option | None:
    """The watched option in the cluster ``args[index]`` ("-sHvalue", "-su"), if any."""
    arg = args[index]
    for position in range(1, len(arg)):
        letter = arg[position]
        if letter not in syntax.valued:
            continue  # a flag: the cluster goes on
        long = syntax.short.get(letter)
        if long is None:
            return None  # another option's value is the rest (or the next argument)
        names, kinds, written = (long,), frozenset({syntax.long[long]}), arg[: position + 1]
        if position + 1 < len(arg):
            return Option(names, kinds, written, index, position + 1, arg[position + 1 :])
        return _value_after(names, kinds, written, args, index)
    return None


def _value_after(
    names: tuple[str, ...], kind: str, written: str, args: Sequence[str], index: int
) -> Option:
    """An option whose value is the next argument (None at the end of the line)."""
    if index + 1 < len(args):
        return Option(names, kind, written, index + 1, 0, args[index + 1])
    return Option(names, kind, written, index, len(args[index]), None)


def wgetrc_command(command: str) -> tuple[str, str, str]:
    """Split a wgetrc command ("http_password = x") into its name as written with its "=" and
    the spaces around ("http_password = "), its normalized name ("httppassword") and its
    value ("x"). A command without "=" has an empty value."""
    name, equals, rest = command.partition("=")
    value = rest.lstrip()
    written = command[: len(command) - len(value)] if equals else command
    return written, re.sub(r"[-_\s]", "", name).lower(), value if equals else ""


def goes_around_proxy(option: Option) -> bool:
    """Tell whether ``option`` sets, replaces or switches off the proxy a tool is given in its
    environment (egress.py), or reads a file that may: a PROXY option, a wgetrc command that
    sets a proxy or ``use_proxy``, or a git config key in GIT_PROXY_KEY."""
    if PROXY in option.kinds:
        return True
    if option.value is None:
        return False
    if option.kind == COMMAND:
        return WGETRC_KINDS.get(wgetrc_command(option.value)[1]) == PROXY
    if option.kind == CONFIG:
        key = option.value.partition("=")[0].strip().lower()
        return GIT_PROXY_KEY.fullmatch(key) is not None
    return False
