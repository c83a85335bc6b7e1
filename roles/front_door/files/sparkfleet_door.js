// sparkfleet front door (nginx njs): hash the client key, route by the body's model, report health.
// Everything else (TLS, limits, logs, proxying and streaming) is nginx's own.
const crypto = require('crypto');

// The digest nginx looks up in the clients map; a malformed header hashes to nothing.
function keyDigest(r) {
    const header = r.headersIn.Authorization || '';
    const match = /^Bearer ([A-Za-z0-9._~+\/=-]{32,512})$/.exec(header);
    return match ? crypto.createHash('sha256').update(match[1]).digest('hex') : '';
}

// The large-body lane's key: 'large' for a request whose body is longer than any model's text (media) or whose
// length is not given (chunked, or an HTTP/2 stream without one), else '' (not counted). Read from the request head,
// before nginx buffers the body.
function largeBody(r) {
    const limit = Number(r.variables.sf_large_body_bytes);
    if (!(limit > 0) || r.method === 'GET' || r.method === 'HEAD') {
        return '';
    }
    const length = r.headersIn['Content-Length'];
    return length === undefined || !(Number(length) <= limit) ? 'large' : '';
}

// An error in OpenAI's format, which client libraries show as is.
function fail(r, status, message, code, param) {
    r.headersOut['Content-Type'] = 'application/json';
    r.return(status, JSON.stringify({
        error: {message: message, type: 'invalid_request_error', param: param || null, code: code},
    }) + '\n');
}

// The top-level "model" of a JSON object, found by a scan that allocates nothing per byte. njs frees nothing
// before the request ends, so whatever a loop allocates stays: JSON.parse of a nested body held hundreds of MiB
// in nginx, a regular expression's match objects 231 MiB per 2 MiB body, a `let`/`const` declared inside a
// loop 19 bytes per byte scanned (njs builds a scope per iteration), JSON.parse of each top-level key 33 bytes
// per body byte. So the scan keeps its state in `var`s and one object, reads the body's bytes (JSON's structure
// is ASCII: UTF-8 text inside strings never looks like it), skips strings whole with indexOf, tracks depth,
// compares top-level keys byte by byte (escapes decoded in place), and only remembers where the last
// top-level model's value lies; that one value is decoded at the end, as in vLLM's json.loads (the last
// "model" wins). The output caps are read as their digits pass. It runs in slices so that a long body does not
// hold the worker from other requests.
var QUOTE = 0x22, BACKSLASH = 0x5c, OPEN = 0x7b, CLOSE = 0x7d, OPEN_LIST = 0x5b, CLOSE_LIST = 0x5d;
var COLON = 0x3a, COMMA = 0x2c, SLICE_STEPS = 16384, LONGEST_MODEL_BYTES = 1024;
// The top-level keys the scan reads: the model it routes by, and the output caps it holds against the model's
// floor (a reasoning model's trace spends max_tokens before its answer). vLLM reads max_completion_tokens
// before max_tokens.
var MODEL = [0x6d, 0x6f, 0x64, 0x65, 0x6c];
var MAX_TOKENS = [0x6d, 0x61, 0x78, 0x5f, 0x74, 0x6f, 0x6b, 0x65, 0x6e, 0x73];
var MAX_COMPLETION_TOKENS = [
    0x6d, 0x61, 0x78, 0x5f, 0x63, 0x6f, 0x6d, 0x70, 0x6c, 0x65, 0x74, 0x69, 0x6f, 0x6e, 0x5f, 0x74, 0x6f, 0x6b, 0x65, 0x6e, 0x73];
var KEY_OTHER = 0, KEY_MODEL = 1, KEY_MAX_TOKENS = 2, KEY_MAX_COMPLETION_TOKENS = 3;
// A cap is read as an integer of at most this many digits (beyond it, no floor is in question).
var LONGEST_CAP_DIGITS = 15;

// A model value longer than any served name: routed nowhere, and never decoded or echoed.
var TOO_LONG = {};

function scanState(body) {
    var buf = typeof body === 'string' ? Buffer.from(body) : body;
    var i = 0, n = buf ? buf.length : 0;
    while (i < n && (buf[i] === 0x20 || buf[i] === 0x09 || buf[i] === 0x0a || buf[i] === 0x0d)) {
        i++;
    }
    // done: null (not a JSON object), true (scanned); valueAt/valueEnd: the last model's string, or -1;
    // caps: the last max_tokens and max_completion_tokens, each a non-negative integer or null.
    // stringAt: the opening quote of a string a slice ran out in (-1: none), pos, nextQuote, nextSlash: where its
    // walk is (stringEnd).
    return {buf: buf, n: n, i: i, depth: 0, key: KEY_OTHER, expectValue: false, valueAt: -1, valueEnd: -1,
        caps: [null, null], done: i < n && buf[i] === OPEN ? false : null, stringAt: -1, pos: 0, nextQuote: -1,
        nextSlash: -1, stringSteps: 0};
}

// A hex digit's value, or a value no letter of "model" can reach.
function hexValue(c) {
    if (c >= 0x30 && c <= 0x39) {
        return c - 0x30;
    }
    if (c >= 0x61 && c <= 0x66) {
        return c - 0x57;
    }
    if (c >= 0x41 && c <= 0x46) {
        return c - 0x37;
    }
    return 65536;
}

// Whether the key between the quotes at..end (exclusive) reads `word` once its escapes are decoded.
function isKey(buf, at, end, word) {
    var i = at, k = 0, code, c, length = word.length;
    if (end - at === length) {
        while (k < length && buf[at + k] === word[k]) {
            k++;
        }
        return k === length;
    }
    // The longest spelling is every character a \uXXXX escape.
    if (end - at > length * 6 || end - at < length) {
        return false;
    }
    while (i < end) {
        c = buf[i];
        if (c === BACKSLASH) {
            if (buf[i + 1] !== 0x75 || i + 6 > end) {
                return false;  // \n, \t and the like are in no key the scan reads
            }
            code = hexValue(buf[i + 2]) * 4096 + hexValue(buf[i + 3]) * 256 + hexValue(buf[i + 4]) * 16
                + hexValue(buf[i + 5]);
            i += 6;
        } else {
            code = c;
            i++;
        }
        if (k >= length || code !== word[k]) {
            return false;
        }
        k++;
    }
    return k === length;
}

// Which of the keys the scan reads the key at..end is.
function keyKind(buf, at, end) {
    var c = buf[at];
    if (c !== 0x6d && c !== BACKSLASH) {
        return KEY_OTHER;  // every key read starts with m
    }
    if (isKey(buf, at, end, MODEL)) {
        return KEY_MODEL;
    }
    if (isKey(buf, at, end, MAX_TOKENS)) {
        return KEY_MAX_TOKENS;
    }
    return isKey(buf, at, end, MAX_COMPLETION_TOKENS) ? KEY_MAX_COMPLETION_TOKENS : KEY_OTHER;
}

// A cap's value starting at i: a non-negative integer, or null for anything else (a float, a string, null);
// returns where the number's bytes end, or i for a value the main loop walks itself.
function readCap(st, i) {
    var buf = st.buf, j = i, value = 0;
    // Bounded: a longer run of digits is walked by the main loop, a step a byte, in its slices.
    while (j < st.n && j - i <= LONGEST_CAP_DIGITS && buf[j] >= 0x30 && buf[j] <= 0x39) {
        value = value * 10 + (buf[j] - 0x30);
        j++;
    }
    var whole = j > i && j - i <= LONGEST_CAP_DIGITS && buf[j] !== 0x2e && buf[j] !== 0x65 && buf[j] !== 0x45;
    st.caps[st.key - KEY_MAX_TOKENS] = whole ? value : null;
    return j > i ? j : i;
}

// Where the string whose content starts at st.pos ends (the index of its closing quote): each escape is a step
// (a body of nothing but escaped quotes or backslashes is walked an escape at a time, not in one go), and both
// searches are remembered, so every byte is looked at once. At most `steps` steps: returns -2 when they ran out
// (st keeps where it is), -1 when the body ends inside the string.
function stringEnd(st, steps) {
    var buf = st.buf, pos = st.pos, quote = st.nextQuote, slash = st.nextSlash, taken = 0;
    for (;;) {
        if (quote < pos) {
            quote = buf.indexOf(QUOTE, pos);
            if (quote < 0) {
                return -1;
            }
        }
        if (slash < pos) {
            slash = buf.indexOf(BACKSLASH, pos);
            if (slash < 0) {
                slash = st.n;  // none left
            }
        }
        if (slash > quote) {
            st.stringSteps = taken;
            return quote;
        }
        if (taken >= steps) {
            st.pos = pos;
            st.nextQuote = quote;
            st.nextSlash = slash;
            st.stringSteps = taken;
            return -2;
        }
        pos = slash + 2;  // the escape and the character it escapes (\uXXXX's digits are plain bytes)
        taken++;
    }
}

// Takes up to `steps` more steps (a byte, a string's run of plain bytes, or one escape in a string); returns false
// while bytes remain, else sets st.done (true or null).
function scanSlice(st, steps) {
    var buf = st.buf, n = st.n, i = st.i, depth = st.depth, key = st.key;
    var expectValue = st.expectValue, taken = 0, c, at, end, next;
    while (i < n && taken < steps) {
        taken++;
        c = st.stringAt >= 0 ? QUOTE : buf[i];
        if (c === QUOTE) {
            // A string: opened at i, or one a slice ran out in (st.stringAt).
            if (st.stringAt < 0) {
                st.stringAt = i;
                st.pos = i + 1;
                st.nextQuote = -1;
                st.nextSlash = -1;
            }
            at = st.stringAt;
            end = stringEnd(st, steps - taken + 1);  // this step and what the slice has left: at least one
            taken += st.stringSteps;
            if (end === -1) {
                st.done = null;
                return true;
            }
            if (end === -2) {
                break;  // on in the next slice, from st.pos
            }
            st.stringAt = -1;
            if (depth === 1) {
                if (!expectValue) {
                    key = keyKind(buf, at + 1, end);
                } else {
                    if (key === KEY_MODEL) {
                        st.valueAt = at;
                        st.valueEnd = end;
                    } else if (key !== KEY_OTHER) {
                        st.caps[key - KEY_MAX_TOKENS] = null;  // a cap that is a string
                    }
                    expectValue = false;
                    key = KEY_OTHER;
                }
            }
            i = end;
        } else if (depth === 1 && c === COLON) {
            expectValue = true;
        } else if (depth === 1 && c === COMMA) {
            if (expectValue && key === KEY_MODEL) {
                st.valueAt = -1;  // a model that is not a string
            }
            expectValue = false;
            key = KEY_OTHER;
        } else if (c === OPEN || c === OPEN_LIST) {
            if (depth === 1) {
                if (expectValue && key === KEY_MODEL) {
                    st.valueAt = -1;
                } else if (expectValue && key !== KEY_OTHER) {
                    st.caps[key - KEY_MAX_TOKENS] = null;
                }
                expectValue = false;
                key = KEY_OTHER;
            }
            depth++;
        } else if (depth === 1 && expectValue && key >= KEY_MAX_TOKENS && c !== 0x20 && c !== 0x09 && c !== 0x0a
            && c !== 0x0d) {
            // A cap's value (a number, true, false or null): read it whole, then the member ends.
            st.key = key;
            next = readCap(st, i);
            expectValue = false;
            key = KEY_OTHER;
            i = next > i ? next - 1 : i;
        } else if (c === CLOSE || c === CLOSE_LIST) {
            if (depth === 1 && expectValue && key === KEY_MODEL) {
                st.valueAt = -1;  // the last member: a model that is not a string
            }
            depth--;
            if (depth === 0) {
                i++;
                while (i < n && (buf[i] === 0x20 || buf[i] === 0x09 || buf[i] === 0x0a || buf[i] === 0x0d)) {
                    i++;
                }
                st.done = i === n ? true : null;
                return true;
            }
        }
        i++;
    }
    st.i = i;
    st.depth = depth;
    st.key = key;
    st.expectValue = expectValue;
    if (i >= n) {
        st.done = null;  // the object never closed
        return true;
    }
    return false;
}

// The scan's answer: the model's name, '' when the object names no string model, TOO_LONG, or null when the
// body is not a JSON object.
function scanResult(st) {
    if (st.done === null) {
        return null;
    }
    if (st.valueAt < 0) {
        return '';
    }
    if (st.valueEnd - st.valueAt > LONGEST_MODEL_BYTES) {
        return TOO_LONG;
    }
    try {
        return JSON.parse(st.buf.slice(st.valueAt, st.valueEnd + 1).toString());
    } catch (e) {
        return null;
    }
}

// The request's output cap as vLLM reads it: max_completion_tokens, else max_tokens; null when neither is a
// non-negative integer (or the body is not a JSON object).
function scanCap(st) {
    if (st.done !== true) {
        return null;
    }
    return st.caps[1] !== null ? st.caps[1] : st.caps[0];
}

function scanWhole(body) {
    var st = scanState(body);
    if (st.done === false) {
        scanSlice(st, st.n);
    }
    return st;
}

function topLevelModel(body) {
    return scanResult(scanWhole(body));
}

function topLevelCap(body) {
    return scanCap(scanWhole(body));
}

// The same scan, handing the worker back to nginx's event loop between slices: a slice of 16,384 steps takes
// about 1.5 ms (CPU sandbox), so 8 worst-case bodies in flight delay another request by about 12 ms, where a
// scan in one go held it up to a second. The timer waits 1 ms: nginx runs a timer of 0 in the same pass that
// set it, without looking at connections in between.
async function scanYielding(body) {
    var st = scanState(body);
    while (st.done === false && !scanSlice(st, SLICE_STEPS)) {
        await new Promise((resolve) => setTimeout(resolve, 1));
    }
    return st;
}

// A reasoning model's request capped under its floor still goes through: its trace would spend the cap and
// leave no answer or tool call, so the door says so in its log and to the client (X-Sparkfleet-Caution).
function cautionOnCap(r, model, cap) {
    const floor = Number(r.variables.sf_min_max_tokens);
    if (floor > 0 && cap !== null && cap < floor) {
        r.variables.sf_caution = 'max_tokens ' + cap + ' is under ' + floor + ', what ' + model
            + ' needs to reason and then answer or call a tool';
    }
}

async function route(r) {
    const scanned = await scanYielding(r.requestBuffer || Buffer.alloc(0));
    const model = scanResult(scanned);
    if (model === null) {
        return fail(r, 400, 'The request body is not a JSON object (or is larger than the door buffers).', 'invalid_json');
    }
    if (model === '') {
        return fail(r, 400, 'The request names no model. Models on this host: ' + r.variables.sf_models + '.',
            'model_required', 'model');
    }
    if (model === TOO_LONG) {
        return fail(r, 404, 'The model named is longer than any on this host. Models on this host: '
            + r.variables.sf_models + '.', 'model_not_found', 'model');
    }
    r.variables.sf_model = model;
    if (!r.variables.sf_upstream) {
        return fail(r, 404, 'The model `' + model + '` does not exist. Models on this host: '
            + r.variables.sf_models + '.', 'model_not_found', 'model');
    }
    if (r.variables.sf_kind !== r.variables.sf_path_kind) {
        return fail(r, 404, 'The model `' + model + '` does not serve ' + r.uri + '.', 'unsupported_path', 'model');
    }
    // Each model's own limit (its plan sizes it to its context); nginx's is the largest model's.
    const limit = Number(r.variables.sf_max_body);
    const size = r.requestBuffer ? r.requestBuffer.length : 0;
    if (limit > 0 && size > limit) {
        return fail(r, 413, 'The request body (' + size + ' bytes) is larger than the ' + (limit / 1048576)
            + ' MiB the model `' + model + '` takes.', 'request_too_large');
    }
    cautionOnCap(r, model, scanCap(scanned));
    if (r.variables.sf_on_demand === '1') {
        // A stopped on-demand instance is started by the activator; the request waits until it serves.
        const reply = await r.subrequest('/_sparkfleet/activate/' + r.variables.sf_instance);
        if (reply.status !== 200) {
            let reason = 'the activator did not answer (' + reply.status + ')';
            try {
                reason = JSON.parse(reply.responseText).reason || reason;
            } catch (e) {
                // keep the status
            }
            r.headersOut['Retry-After'] = r.variables.sf_retry_after;
            return fail(r, 503, 'The model `' + model + '` is switched on demand and is not ready: ' + reason
                + '. Retry shortly.', 'model_unavailable', 'model');
        }
    }
    r.internalRedirect("@sparkfleet_proxy_" + r.variables.sf_instance);
}

// ok only when every always-on instance answers its /health; says nothing else. Each is asked
// through an internal location (its upstream may be a Unix socket, which ngx.fetch cannot reach).
async function health(r) {
    const targets = (r.variables.sf_health || '').split(' ').filter((t) => t !== '');
    // A host whose models are all on demand is healthy when its door is.
    let ok = targets.length > 0 || r.variables.sf_models !== '';
    try {
        const replies = await Promise.all(targets.map((t) => r.subrequest('/_sparkfleet/health/' + t)));
        ok = ok && replies.every((reply) => reply.status === 200);
    } catch (e) {
        ok = false;
    }
    r.headersOut['Content-Type'] = 'text/plain';
    r.return(ok ? 200 : 503, ok ? 'ok\n' : 'not ok\n');
}

// The scan in slices of `steps` as the router takes them: [model, cap, slices taken] (the router's tests).
function scanSliced(body, steps) {
    var st = scanState(body), slices = 0;
    while (st.done === false) {
        slices++;
        if (scanSlice(st, steps)) {
            break;
        }
    }
    var model = scanResult(st);
    return [model === TOO_LONG ? null : model, scanCap(st), slices];
}

export default {keyDigest, largeBody, route, health, topLevelModel, topLevelCap, scanSliced};
