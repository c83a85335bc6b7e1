// sparkfleet front door (nginx njs): hash the client key, route by the body's model, report health.
// Everything else (TLS, limits, logs, proxying and streaming) is nginx's own.
const crypto = require('crypto');

// The digest nginx looks up in the clients map; a malformed header hashes to nothing.
function keyDigest(r) {
    const header = r.headersIn.Authorization || '';
    const match = /^Bearer ([A-Za-z0-9._~+\/=-]{32,512})$/.exec(header);
    return match ? crypto.createHash('sha256').update(match[1]).digest('hex') : '';
}

// An error in OpenAI's format, which client libraries show as is.
function fail(r, status, message, code, param) {
    r.headersOut['Content-Type'] = 'application/json';
    r.return(status, JSON.stringify({
        error: {message: message, type: 'invalid_request_error', param: param || null, code: code},
    }) + '\n');
}

// The top-level "model" of a JSON object, found by a scan that builds nothing: JSON.parse of a nested body
// held hundreds of MiB in nginx (2 MiB of nested arrays grew it by 151 MiB), and so did a regular expression's
// match objects, one per bracket (231 MiB per 2 MiB body). The scan reads the body's bytes (JSON's structure
// is ASCII, so UTF-8 text inside strings never looks like it), skips strings whole with indexOf, tracks depth
// only, and decodes nothing but keys at the top level and the model's value. The last top-level "model" wins,
// as in vLLM's json.loads. Returns a string, '' when the object names no string model, or null when the body
// is not a JSON object.
const QUOTE = 0x22, BACKSLASH = 0x5c, OPEN = 0x7b, CLOSE = 0x7d, OPEN_LIST = 0x5b, CLOSE_LIST = 0x5d;
const COLON = 0x3a, COMMA = 0x2c;

function isSpace(c) {
    return c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;
}

function topLevelModel(body) {
    const buf = typeof body === 'string' ? Buffer.from(body) : body;
    const n = buf ? buf.length : 0;
    let depth = 0;
    let model = '';
    let lastKey = null;   // a string just read at depth 1 that may be a key
    let expectValue = false;
    let i = 0;
    while (i < n && isSpace(buf[i])) {
        i++;
    }
    if (i >= n || buf[i] !== OPEN) {
        return null;
    }
    for (; i < n; i++) {
        const c = buf[i];
        if (c === QUOTE) {
            const at = i;
            let end = at + 1;
            for (;;) {
                end = buf.indexOf(QUOTE, end);
                if (end < 0) {
                    return null;
                }
                let slashes = 0;
                while (buf[end - 1 - slashes] === BACKSLASH) {
                    slashes++;
                }
                if (slashes % 2 === 0) {
                    break;
                }
                end++;
            }
            if (depth === 1) {
                // Only keys and the model's value are decoded (an escaped key such as "mod\u0065l" is the
                // name json.loads reads); any other top-level string is skipped unread.
                const decode = !expectValue || lastKey === 'model';
                let text = null;
                if (decode) {
                    try {
                        text = JSON.parse(buf.slice(at, end + 1).toString());
                    } catch (e) {
                        return null;
                    }
                }
                if (expectValue) {
                    if (lastKey === 'model') {
                        model = text;
                    }
                    expectValue = false;
                    lastKey = null;
                } else {
                    lastKey = text;
                }
            }
            i = end;
        } else if (c === COLON) {
            if (depth === 1) {
                expectValue = true;
            }
        } else if (c === COMMA) {
            if (depth === 1) {
                if (expectValue && lastKey === 'model') {
                    model = '';  // a model that is not a string
                }
                expectValue = false;
                lastKey = null;
            }
        } else if (c === OPEN || c === OPEN_LIST) {
            if (depth === 1 && expectValue && lastKey === 'model') {
                model = '';
            }
            if (depth === 1) {
                expectValue = false;
                lastKey = null;
            }
            depth++;
        } else if (c === CLOSE || c === CLOSE_LIST) {
            if (depth === 1 && expectValue && lastKey === 'model') {
                model = '';  // the last member: a model that is not a string
            }
            depth--;
            if (depth === 0) {
                for (let j = i + 1; j < n; j++) {
                    if (!isSpace(buf[j])) {
                        return null;
                    }
                }
                return model;
            }
        }
    }
    return null;
}

async function route(r) {
    const model = topLevelModel(r.requestBuffer || Buffer.alloc(0));
    if (model === null) {
        return fail(r, 400, 'The request body is not a JSON object (or is larger than the door buffers).', 'invalid_json');
    }
    if (model === '') {
        return fail(r, 400, 'The request names no model. Models on this host: ' + r.variables.sf_models + '.',
            'model_required', 'model');
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
    r.internalRedirect("@sparkfleet_proxy");
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

export default {keyDigest, route, health, topLevelModel};
