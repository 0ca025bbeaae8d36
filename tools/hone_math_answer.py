"""hone's math answer checker in Python: extraction, normalization and comparison.

A line-by-line port of src/reward/math_answer_extract.cpp, math_answer_normalize.cpp and math_answer.cpp
(doc/data-and-rewards.md, "The math answer checker"), so that tools/reference_grpo.py scores completions as
`hone run` does. It works on str instead of bytes and on exact Python fractions instead of 128-bit rationals; for
ASCII text and numbers of up to 36 digits the two give the same answers.

    reward(completion, truth, fallback_last_number=True, format="boxed", format_reward=0.0) -> (reward, correct)
"""

from fractions import Fraction


def _space(c):
    return c in " \t\n\r\f\v"


def _digit(c):
    return "0" <= c <= "9"


def _alpha(c):
    return ("a" <= c <= "z") or ("A" <= c <= "Z")


def _trim(s):
    b, e = 0, len(s)
    while b < e and _space(s[b]):
        b += 1
    while e > b and _space(s[e - 1]):
        e -= 1
    return s[b:e]


# ---- extraction (math_answer_extract.cpp) ----

def _brace_matches(s):
    """{position of '{': position of its '}' or None}; escaped braces are text."""
    opens, stack, match = [], [], {}
    i = 0
    while i < len(s):
        if s[i] == "\\" and i + 1 < len(s) and s[i + 1] in "{}":
            i += 2
            continue
        if s[i] == "{":
            stack.append(i)
            match[i] = None
        elif s[i] == "}" and stack:
            match[stack.pop()] = i
        i += 1
    return match


def extract_boxed(text):
    if "\\boxed" not in text and "\\fbox" not in text:
        return None
    braces = _brace_matches(text)
    best = None
    i = 0
    n = len(text)
    while i < n:
        at = text.find("\\", i)
        if at < 0:
            break
        if text.startswith("\\boxed", at):
            cmd_end = at + 6
        elif text.startswith("\\fbox", at):
            cmd_end = at + 5
        else:
            i = at + 1
            continue
        if cmd_end < n and _alpha(text[cmd_end]):
            i = cmd_end
            continue
        k = cmd_end
        while k < n and text[k] in " \t":
            k += 1
        if k < n and text[k] == "{":
            close = braces.get(k)
            if close is None:
                i = k + 1
                continue
            best = _trim(text[k + 1:close])
            i = close + 1
        elif k > cmd_end and k < n:
            e = k
            while e < n and not _space(text[e]) and text[e] != "$":
                e += 1
            if e > k:
                best = text[k:e]
            i = e
        else:
            i = k
    if best is not None and best == "":
        return None
    return best


def _rest_of_line(s, start):
    end = s.find("\n", start)
    return s[start:] if end < 0 else s[start:end]


def extract_hashes(text):
    pos = text.rfind("####")
    if pos < 0:
        return None
    start = pos + 4
    while start < len(text) and text[start] == "#":
        start += 1
    a = _trim(_rest_of_line(text, start))
    return a or None


def _rfind_nocase(s, needle, line_start):
    n = len(needle)
    low = s.lower() if s.isascii() else "".join(c.lower() if "A" <= c <= "Z" else c for c in s)
    i = len(s) - n
    while i >= 0:
        i = low.rfind(needle, 0, i + n)
        if i < 0:
            return -1
        if not line_start:
            return i
        j = i
        while j > 0 and s[j - 1] in " \t*#>":
            j -= 1
        if j == 0 or s[j - 1] == "\n":
            return i
        i -= 1
    return -1


def extract_phrase(text):
    phrases = [("the answer is", False), ("final answer is", False), ("final answer:", False),
               ("answer is:", True), ("answer:", True)]
    best, best_end = -1, 0
    for p, line_start in phrases:
        at = _rfind_nocase(text, p, line_start)
        if at < 0:
            continue
        if best < 0 or at > best or (at == best and at + len(p) > best_end):
            best, best_end = at, at + len(p)
    if best < 0:
        return None
    a = _rest_of_line(text, best_end)
    b = 0
    while b < len(a) and (_space(a[b]) or a[b] in ":*"):
        b += 1
    a = a[b:]
    for i in range(len(a) - 1):
        if a[i] == "." and _space(a[i + 1]):
            a = a[:i]
            break
    a = _trim(a)
    while a and a[-1] in ".*":
        a = a[:-1]
    return a or None


def extract_last_number(text):
    i = len(text)
    while i > 0 and not _digit(text[i - 1]):
        i -= 1
    if i == 0:
        return None
    end = begin = i
    n = len(text)

    def number_char(k):
        c = text[k]
        if _digit(c):
            return True
        return c in ",./" and k > 0 and k + 1 < n and _digit(text[k - 1]) and _digit(text[k + 1])

    while True:
        if begin > 0 and number_char(begin - 1):
            begin -= 1
        elif begin >= 3 and text[begin - 2:begin] == "\\," and _digit(text[begin - 3]):
            begin -= 2
        elif begin >= 4 and text[begin - 3:begin] == "{,}" and _digit(text[begin - 4]):
            begin -= 3
        else:
            break
    if begin > 0 and text[begin - 1] == "." and (begin == 1 or not _digit(text[begin - 2])):
        begin -= 1
    if begin > 0 and text[begin - 1] == "-" and (begin == 1 or (not _alpha(text[begin - 2]) and
                                                                not _digit(text[begin - 2]))):
        begin -= 1
    return text[begin:end]


def extract_final_answer(completion, fallback_last_number=True):
    """(source, text): source is boxed, hashes, phrase, last_number or None."""
    for source, f in (("boxed", extract_boxed), ("hashes", extract_hashes), ("phrase", extract_phrase)):
        a = f(completion)
        if a is not None:
            return source, a
    if not fallback_last_number:
        return None, None
    if len(completion.encode("utf-8", "surrogatepass")) <= 200 and "\\boxed" not in completion and \
            "\\fbox" not in completion:
        if normalize_answer(completion)[0]:
            return "last_number", _trim(completion)
    a = extract_last_number(completion)
    return ("last_number", a) if a is not None else (None, None)


# ---- normalization (math_answer_normalize.cpp) ----

def _replace_all(s, old, new):
    command = len(old) > 1 and old[0] == "\\" and _alpha(old[-1])
    if not command:
        return s.replace(old, new)
    out, i, n = [], 0, len(old)
    while i < len(s):
        if s.startswith(old, i) and not (i + n < len(s) and _alpha(s[i + n])):
            out.append(new)
            i += n
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def _unwrap_commands(s, names, pad):
    out, unwrap, i = [], [], 0
    while i < len(s):
        if s[i] == "\\":
            done = False
            for name in names:
                if not s.startswith(name, i):
                    continue
                k = i + len(name)
                if k < len(s) and _alpha(s[k]):
                    continue
                while k < len(s) and s[k] == " ":
                    k += 1
                if k < len(s) and s[k] == "{":
                    unwrap.append(True)
                    out.append(pad)
                    i = k + 1
                    done = True
                    break
            if done:
                continue
            if i + 1 < len(s) and s[i + 1] in "{}":
                out.append(s[i:i + 2])
                i += 2
                continue
        if s[i] == "{":
            unwrap.append(False)
        if s[i] == "}" and unwrap:
            if unwrap.pop():
                out.append(pad)
                i += 1
                continue
        out.append(s[i])
        i += 1
    return "".join(out)


def _brace_shorthand(s):
    out, i = [], 0
    while i < len(s):
        args = 0
        if s.startswith("\\frac", i) and not (i + 5 < len(s) and _alpha(s[i + 5])):
            args = 2
        if s.startswith("\\sqrt", i) and not (i + 5 < len(s) and _alpha(s[i + 5])):
            args = 1
        if args == 0:
            out.append(s[i])
            i += 1
            continue
        out.append(s[i:i + 5])
        i += 5
        for _ in range(args):
            if i >= len(s) or s[i] in "{[\\":
                break
            out.append("{" + s[i] + "}")
            i += 1
    return "".join(out)


def _is_variable(v):
    if not v or len(v) > 12:
        return False
    if not _alpha(v[0]) and v[0] != "\\":
        return False
    return all(_alpha(c) or _digit(c) or c in "_{}\\" for c in v)


def _strip_units(s):
    j, digit = 0, False
    while j < len(s) and (_digit(s[j]) or s[j] in ".,-+ "):
        digit = digit or _digit(s[j])
        j += 1
    if not digit or j == 0 or j >= len(s) or s[j - 1] != " " or not _alpha(s[j]):
        return s
    w = j
    while w < len(s) and _alpha(s[w]):
        w += 1
    word = s[j:w]
    if len(word) < 2 or word in ("pi", "and", "or", "to"):
        return s
    for c in s[j:]:
        if not _alpha(c) and not _digit(c) and c not in " ^/.{}":
            return s
    return _trim(s[:j])


def _drop_thousands_commas(s):
    i = 1 if s[:1] in ("-", "+") and s else 0
    lead = 0
    while i + lead < len(s) and _digit(s[i + lead]):
        lead += 1
    if lead < 1 or lead > 3 or i + lead >= len(s) or s[i + lead] != ",":
        return s
    k = i + lead
    while k < len(s) and s[k] == ",":
        for d in range(1, 4):
            if k + d >= len(s) or not _digit(s[k + d]):
                return s
        k += 4
    if k < len(s) and s[k] != ".":
        return s
    if k < len(s) and not all(_digit(c) for c in s[k + 1:]):
        return s
    return s.replace(",", "")


class Number:
    """A parsed number: its exact value, and how it was written."""

    def __init__(self, value, integer_literal, real):
        self.value = value  # Fraction
        self.integer_literal = integer_literal
        self.real = real
        self.percent = False


def _parse_decimal(s):
    i, neg = 0, False
    if s[:1] in ("-", "+") and s:
        neg = s[0] == "-"
        i = 1
    w0 = i
    while i < len(s) and _digit(s[i]):
        i += 1
    whole = s[w0:i]
    point = i < len(s) and s[i] == "."
    frac = ""
    if point:
        i += 1
        f0 = i
        while i < len(s) and _digit(s[i]):
            i += 1
        frac = s[f0:i]
    if not whole and not frac:
        return None
    exp, sci = 0, False
    if i < len(s) and s[i] in "eE":
        i += 1
        eneg = False
        if i < len(s) and s[i] in "-+":
            eneg = s[i] == "-"
            i += 1
        e0 = i
        while i < len(s) and _digit(s[i]):
            i += 1
            if i - e0 > 9:
                return None
        if i == e0:
            return None
        exp = int(s[e0:i]) * (-1 if eneg else 1)
        sci = True
    if i != len(s):
        return None
    v = Fraction(int((whole + frac) or "0")) * Fraction(10) ** (exp - len(frac))
    return Number(-v if neg else v, not point and not sci, (point and frac != "") or sci)


def _make_fraction(a, b):
    if b.value == 0:
        return None
    m = Number(a.value / b.value, False, a.real or b.real)
    return m


def parse_math_number(s):
    if not s or len(s) > 400:
        return None
    m = _parse_decimal(s)
    if m is not None:
        return m
    if s.startswith("10^"):
        return parse_math_number("1\\times" + s)
    i, neg = 0, False
    if s[0] in "-+":
        neg, i = s[0] == "-", 1
    if s.startswith("\\frac{", i):
        a0 = i + 6
        a1 = s.find("}", a0)
        if a1 < 0 or a1 + 1 >= len(s) or s[a1 + 1] != "{" or s[-1] != "}":
            return None
        a, b = _parse_decimal(s[a0:a1]), _parse_decimal(s[a1 + 2:-1])
        if a is None or b is None:
            return None
        out = _make_fraction(a, b)
    else:
        slash = s.find("/", i)
        times, tlen = -1, 0
        for t in ("\\times10^", "\\cdot10^", "*10^", "x10^"):
            at = s.find(t)
            if at >= 0:
                times, tlen = at, len(t)
        if slash > i and s.find("/", slash + 1) < 0:
            a, b = _parse_decimal(s[i:slash]), _parse_decimal(s[slash + 1:])
            if a is None or b is None:
                return None
            out = _make_fraction(a, b)
        elif times >= 0:
            exp = s[times + tlen:]
            if len(exp) >= 2 and exp[0] == "{" and exp[-1] == "}":
                exp = exp[1:-1]
            mant = s[i:times]
            if any(c in "eE" for c in mant) or not exp:
                return None
            for k, c in enumerate(exp):
                if not _digit(c) and not (k == 0 and c in "-+"):
                    return None
            out = _parse_decimal(mant + "e" + exp)
        else:
            return None
    if out is None:
        return None
    if neg:
        out.value = -out.value
    return out


def _strip_text_unit(s):
    p = -1
    for cmd in ("\\text{", "\\text {", "\\mbox{", "\\mathrm{"):
        p = max(p, s.rfind(cmd))
    if p <= 0:
        return s
    depth, close = 0, -1
    for i in range(s.find("{", p), len(s)):
        if s[i] == "{":
            depth += 1
        if s[i] == "}":
            depth -= 1
            if depth == 0:
                close = i
                break
    if close < 0:
        return s
    tail = _trim(s[close + 1:])
    if not (tail == "" or (tail[0] == "^" and len(tail) <= 4)):
        return s
    head = _trim(s[:p])
    if not any(_digit(c) for c in head) or not (_digit(head[-1]) or head[-1] == "}"):
        return s
    return head


def _strip_outer_braces(s):
    if len(s) < 2 or s[0] != "{" or s[-1] != "}":
        return s
    match, stack = {}, []
    for i, c in enumerate(s):
        if c == "{":
            stack.append(i)
        if c == "}" and stack:
            match[stack.pop()] = i
    l, r = 0, len(s) - 1
    while l < r and s[l] == "{" and match.get(l) == r:
        l, r = l + 1, r - 1
    return s[l:r + 1]


_REPLACEMENTS = [("\\dfrac", "\\frac"), ("\\tfrac", "\\frac"), ("\\cfrac", "\\frac"), ("\\left", ""),
                 ("\\right", ""), ("\\displaystyle", ""), ("\\!", ""), ("\\,", ""), ("\\;", ""), ("\\:", ""),
                 ("\\ ", " "), ("~", " "), ("{,}", ""), ("\\$", ""), ("$", ""), ("\\(", ""), ("\\)", ""),
                 ("\\[", ""), ("\\]", ""), ("^{\\circ}", ""), ("^\\circ", ""), ("\\circ", ""), ("\u00b0", ""),
                 ("\\degree", ""), ("\\%", "%"), ("\\le", "\\leq"), ("\\ge", "\\geq"), ("\u2212", "-")]


def normalize_answer(raw):
    """(is_number, Number or None, text)."""
    s = _unwrap_commands(raw, ["\\boxed", "\\fbox"], "")
    s = _strip_text_unit(s)
    s = _unwrap_commands(s, ["\\text", "\\textbf", "\\textit", "\\textrm", "\\texttt", "\\textnormal", "\\mathrm",
                             "\\mathbf", "\\mathit", "\\mbox", "\\hbox", "\\operatorname"], " ")
    for a, b in _REPLACEMENTS:
        s = _replace_all(s, a, b)
    s = _trim(s)
    percent, changed = False, True
    while changed:
        changed = False
        while s and (s[-1] == "." or _space(s[-1])):
            s, changed = s[:-1], True
        for suffix in ("%", "percent"):
            if s.endswith(suffix):
                s, percent, changed = s[:-len(suffix)], True, True
                break
    eq = s.find("=")
    if eq > 0 and s.find("=", eq + 1) < 0 and s[eq - 1] not in "<>!":
        left, right = _trim(s[:eq]), _trim(s[eq + 1:])
        if _is_variable(left) and right:
            s = right
    at = s.find("\\in")
    if at >= 0 and _is_variable(_trim(s[:at])) and at + 3 < len(s) and not _alpha(s[at + 3]):
        s = _trim(s[at + 3:])
    s = _trim(_strip_units(s))
    s = "".join(c for c in s if not _space(c))
    s = _brace_shorthand(s)
    s = _strip_outer_braces(s)
    if len(s) == 3 and s[0] == "(" and s[2] == ")" and _alpha(s[1]):
        s = s[1]
    if len(s) >= 2 and all(_alpha(c) for c in s):
        s = s.lower()
    s = _drop_thousands_commas(s)
    num = parse_math_number(s)
    if num is not None:
        num.percent = percent
        return True, num, s
    return False, None, s + ("%" if percent else "")


# ---- comparison (math_answer.cpp) ----

def _numbers_equal(a, b, tol):
    if a.value == b.value:
        return True
    if (a.real or b.real) and not a.integer_literal and not b.integer_literal:
        x, y = float(a.value), float(b.value)
        return abs(x - y) <= tol * max(abs(x), abs(y))
    return False


def _percent_value(m):
    p = Number(m.value / 100, False, m.real)
    return p


def ground_truth_answer(truth):
    for f in (extract_boxed, extract_hashes):
        a = f(truth)
        if a is not None:
            return a
    return truth


def answers_equal(given, truth, tol=1e-6):
    g_num, g, g_text = normalize_answer(given)
    t_num, t, t_text = normalize_answer(truth)
    if g_num and t_num:
        if _numbers_equal(g, t, tol):
            return True
        if g.percent and _numbers_equal(_percent_value(g), t, tol):
            return True
        if t.percent and _numbers_equal(g, _percent_value(t), tol):
            return True
        return False
    if g_num != t_num:
        return False
    return t_text != "" and g_text == t_text


def reward(completion, truth, fallback_last_number=True, format="boxed", format_reward=0.0, tol=1e-6):
    """(reward, correct), as hone's MathReward::score."""
    try:
        source, text = extract_final_answer(completion, fallback_last_number)
        correct = text is not None and answers_equal(text, ground_truth_answer(str(truth)), tol)
    except Exception:  # noqa: BLE001 - like hone: a wrong answer, never a failed run
        source, correct = None, False
    formats = {"boxed": ("boxed",), "hashes": ("hashes",), "any": ("boxed", "hashes", "phrase")}[format]
    formatted = source in formats
    return (1.0 if correct else 0.0) + (format_reward if formatted else 0.0), correct


# Cases from doc/data-and-rewards.md: (completion, truth, correct).
SELF_TEST = [
    ("41 + 29 = 70", "70", True),
    ("70", "70", True),
    ("The answer is 70.", "70", True),
    ("So the answer is 42. I hope it is correct.", "42", True),
    ("**Final Answer:** 42", "42", True),
    ("\\boxed{70} but maybe 71", "70", True),
    ("I think 69, no, 71", "70", False),
    ("It is 3-5", "5", True),
    ("$1{,}234$", "1234", True),
    ("1,234 apples", "1234", True),
    ("70.0", "70", True),
    ("014", "14", True),
    ("2.9999999", "3", False),
    ("50%", "0.5", True),
    ("x = 5", "5", True),
    ("5 cm", "5", True),
    ("\\frac{2}{4}", "1/2", True),
    ("no number here", "70", False),
    ("", "70", False),
    ("The total is -12", "-12", True),
    ("Half of 48 is 24.\n#### 72", "Natalia ... #### 72", True),
    ("a1-5", "5", True),
]


def self_test():
    bad = 0
    for completion, truth, want in SELF_TEST:
        got = reward(completion, truth)[1]
        if got != want:
            print(f"math checker: {completion!r} vs {truth!r}: {got}, expected {want}")
            bad += 1
    return bad
