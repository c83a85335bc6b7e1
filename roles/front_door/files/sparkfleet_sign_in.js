// sparkfleet front door (nginx njs): the chat UI's sign-in lockout. Open WebUI counts guesses per account (15 in
// 3 minutes), not per address, and locks nothing out; nginx's limit_req slows an address but never shuts it out.
// Here an address with `failures` failed sign-ins in `window` seconds gets 429 with Retry-After until the oldest of
// them is `window` old, whatever it sends; a sign-in that succeeds forgets its failures.
//
// njs keeps nothing between requests (the shared dictionary came after Debian's njs), so the failures live in
// files under the door's own directory: an address's in one of BUCKETS files, each holding at most
// ADDRESSES_PER_BUCKET addresses (the oldest forgotten first), so that addresses without end cannot fill the disk.
// Two workers writing one bucket at the same instant may lose one failure: a guesser gains one guess at most.
const fs = require('fs');
const crypto = require('crypto');

var BUCKETS = 1024, ADDRESSES_PER_BUCKET = 32;

// $sf_sign_in: "<failures> <window seconds> <directory>", the plan's limits and the role's directory.
function settings(r) {
    var parts = (r.variables.sf_sign_in || '').split(' ');
    return {failures: Number(parts[0]), window: Number(parts[1]), dir: parts[2]};
}

// An IPv6 client counts by its /64, which one host holds whole; an IPv4-mapped one as its IPv4 address.
function source(r) {
    var address = r.remoteAddress;
    if (address.indexOf(':') < 0) {
        return address;
    }
    if (address.indexOf('.') >= 0) {
        return address.slice(address.lastIndexOf(':') + 1);
    }
    var halves = address.split('::');
    var head = halves[0] ? halves[0].split(':') : [];
    var tail = halves.length > 1 && halves[1] ? halves[1].split(':') : [];
    var groups = head.concat(new Array(8 - head.length - tail.length).fill('0'), tail);
    return groups.slice(0, 4).map((g) => g.replace(/^0+(?=.)/, '')).join(':') + '::/64';
}

function bucketOf(s, address) {
    var digest = crypto.createHash('sha256').update(address).digest('hex');
    return s.dir + '/' + (parseInt(digest.slice(0, 8), 16) % BUCKETS);
}

function readBucket(file) {
    try {
        var found = JSON.parse(fs.readFileSync(file, 'utf8'));
        return found !== null && typeof found === 'object' ? found : {};
    } catch (e) {
        return {};
    }
}

// The failures of each address still inside the window, the newest `failures` of them.
function recent(times, now, s) {
    return (Array.isArray(times) ? times : []).filter((t) => now - t < s.window).slice(-s.failures);
}

// '' while the address may try; else the seconds until it may (nginx answers 429 with that Retry-After).
function locked(r) {
    var s = settings(r);
    if (!(s.failures > 0 && s.window > 0 && s.dir)) {
        return '';
    }
    var address = source(r), now = Date.now() / 1000;
    var times = recent(readBucket(bucketOf(s, address))[address], now, s);
    return times.length < s.failures ? '' : String(Math.max(1, Math.ceil(times[0] + s.window - now)));
}

function writeBucket(file, bucket) {
    var partial = file + '.' + process.pid;
    fs.writeFileSync(partial, JSON.stringify(bucket), {mode: 0o600});
    fs.renameSync(partial, file);
}

// The UI's answer to a sign-in: 400 is a wrong address or password (Open WebUI's INVALID_CRED), 200 a session.
function result(r) {
    var s = settings(r);
    if (!(s.failures > 0 && s.window > 0 && s.dir) || (r.status !== 400 && r.status !== 200)) {
        return;
    }
    var address = source(r), now = Date.now() / 1000, file = bucketOf(s, address);
    var bucket = readBucket(file), kept = {};
    Object.keys(bucket).forEach((a) => {
        var times = recent(bucket[a], now, s);
        if (times.length > 0 && a !== address) {
            kept[a] = times;
        }
    });
    if (r.status === 400) {
        kept[address] = recent(bucket[address], now, s).concat([now]).slice(-s.failures);
        var oldest = Object.keys(kept).sort((a, b) => kept[a][kept[a].length - 1] - kept[b][kept[b].length - 1]);
        oldest.slice(0, Math.max(0, oldest.length - ADDRESSES_PER_BUCKET)).forEach((a) => delete kept[a]);
        // At error level: Debian's nginx.conf logs nothing below it.
        if (kept[address] && kept[address].length >= s.failures) {
            r.error('sparkfleet door: sign-in from ' + address + ' locked out for ' + s.window + ' s after '
                + s.failures + ' failures');
        }
    } else if (!(address in bucket)) {
        return;
    }
    try {
        writeBucket(file, kept);
    } catch (e) {
        r.error('sparkfleet door: cannot record a sign-in in ' + s.dir + ': ' + e.message);
    }
}

export default {locked, result, source};
