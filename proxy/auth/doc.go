// Package auth decides who a client is and what it may do: identities from
// verified client certificates, source addresses and shared-secret tokens,
// and per-identity rights to produce to, consume from and administer
// Gearman functions and Beanstalk tubes. It is pure: it opens no sockets and
// reads files only in [New] (token files), so the proxy calls it inline.
//
// # How the proxy uses it
//
// Build one [*Policy] from the config with [New]. When a connection is
// accepted (after its TLS handshake) call [Policy.Identify] with the
// [Peer] from [PeerOf] (source address, verified client certificate), and
// keep the [Identity] in the client session.
// When the client later presents a token (see below), call Identify again
// with the token added and keep the new Identity; [Policy.CheckToken] says
// whether the token is known at all, to answer the token command.
//
// For every request the tables [BeanstalkNeed] and [GearmanNeed] say which
// [Action] it needs on which name; call [Policy.Decide], which is fast and
// allocation-free. When the [Decision] is not allowed, answer with the
// protocol's denial reply below and log it with [LogDenied] (the identity,
// its method and the remote address are in every denial log line, at Warn).
//
// Identification follows the config's documented semantics: a client is the
// first identity, in file order, that matches it by certificate name
// (subject CN or any DNS SAN of a verified certificate, exactly; DNS names
// case-insensitively), source address (CIDR) or token. So a token
// identifies a client only if no earlier identity already matched it; list
// token identities first when a token should win over an address range.
// A client no identity matches is anonymous; with auth enabled, anonymous
// clients are denied everything, and a rule for "*" grants to every
// identified client.
//
// Names are matched by path.Match globs, exactly like the config's
// validator: "*" matches any run of bytes except '/', so "*" alone does not
// match the tube "a/b" ("*/*" or "a/*" does).
//
// # Token wire forms
//
// Tokens are 16 to 128 bytes of the Beanstalk tube-name alphabet
// [A-Za-z0-9-+/;.$_()] (checked by [New]), so every form below can carry
// them. The proxy consumes these commands: they are never forwarded
// upstream.
//
// Beanstalk: "use jobgate-auth.<token>\r\n" (see [ParseBeanstalkToken]).
// Almost no Beanstalk client library can send an arbitrary command, but all
// of them can `use` a tube, so a token hidden in a reserved tube name works
// with unmodified pheanstalk, beanstalkc, greenstalk, go-beanstalk and
// beaneater (the last two tested here: TestGoBeanstalkClient,
// TestBeaneater). The proxy always answers "USING jobgate-auth.<token>\r\n",
// the echo libraries expect, and leaves the session's used tube unchanged
// (clients `use` their real tube afterwards, which they do since their
// cached used tube differs). A known token changes the identity as
// Identify says; an unknown one changes nothing and is logged
// ([LogBadToken]), and the client learns of it from the denial its next
// request gets. `use` must not fail: go-beanstalk, for one, sends it
// pipelined in front of the next command and skips its reply unread, so an
// error line would be taken as that command's reply. (The proxy should
// close a connection after a few unknown tokens, as a brake on guessing.)
// Tube names starting with "jobgate-auth." are reserved ([IsReservedTube]):
// none ever reaches a backend, and watching one is treated as watching a
// tube the client may not consume. A dedicated "auth <token>" command was
// rejected because the libraries above cannot send it and beanstalkd's
// grammar has no reply shape for it.
//
// Gearman: OPTION_REQ "auth=<token>" (see [ParseGearmanOption]), the
// protocol's own request/response for connection options. On success the
// proxy answers OPTION_RES with the same option text, as gearmand does for
// "exceptions"; on an unknown token, ERROR [GearmanDeniedCode]
// [GearmanBadTokenText]. Because few libraries expose OPTION_REQ, a worker
// may instead send SET_CLIENT_ID "jobgate-auth.<token>" (see
// [ParseGearmanClientID]), which libgearman (gearman_worker_set_identifier,
// PHP GearmanWorker::setId), Perl's Gearman::Worker (client_id), python
// gearman and gearman-go workers can all send. SET_CLIENT_ID has no reply
// in the protocol, so an unknown token there is only logged; later
// requests are denied as the client's identity dictates. TestPerlGearman
// sends both forms with the Perl library.
//
// # Denial replies
//
// Gearman: a denied SUBMIT_JOB* gets ERROR with code [GearmanDeniedCode]
// ("PERMISSION_DENIED", in gearmand's code style) and a fixed text
// ([GearmanDeniedText]), the reply shape gearmand uses for a full queue;
// Perl's Gearman::Client dies with both in its message (see
// TestPerlGearman); libgearman surfaces an ERROR's code and text in its
// error string.
// A denied CAN_DO/CAN_DO_TIMEOUT gets no reply: the protocol has none for
// it, and an unsolicited ERROR would be taken by the worker library as the
// reply to its next GRAB_JOB or ECHO and break its state; the function is
// simply not registered (and the denial logged). A denied text admin line
// gets [GearmanAdminDenied], in gearmand's "ERR <CODE> <text+with+pluses>"
// form, which gearadmin prints as "Error: PERMISSION_DENIED ...".
//
// Beanstalk: every hard denial (put, reserve, reserve-with-timeout,
// reserve-job, delete, peek*, kick, kick-job, stats*, list-tubes,
// pause-tube) is answered "NOT_FOUND\r\n" ([BeanstalkDenied]). It has to
// be a word of beanstalkd's own vocabulary: Ruby's beaneater raises only
// for those (OUT_OF_MEMORY, INTERNAL_ERROR, BAD_FORMAT, UNKNOWN_COMMAND,
// JOB_TOO_BIG, DRAINING, TIMED_OUT, DEADLINE_SOON, NOT_FOUND, NOT_IGNORED,
// EXPECTED_CRLF) and returns anything else as a success status, so a
// custom PERMISSION_DENIED came back from put as {status:
// "PERMISSION_DENIED"} and from reserve as a Job with no id (see
// TestBeaneater). Of those words NOT_FOUND is the one that is true to the
// client: what it may not see does not exist for it. It is the native
// answer of the job- and tube-scoped commands, so it also hides whether
// another team's job or tube exists. go-beanstalk (ErrNotFound) and
// beaneater (NotFoundError) raise it, as the tests show; greenstalk,
// beanstalkc and pheanstalk raise on it too (a known error word, or one
// their command does not expect). It has no body, so the stream stays in
// sync. The others
// mislead worse: BAD_FORMAT and UNKNOWN_COMMAND blame the client's code
// (and some libraries take UNKNOWN_COMMAND to mean an old server),
// INTERNAL_ERROR and DRAINING invite retries. The jobgate log line (with
// the identity) says what really happened.
//
// use, watch and ignore are never refused ([BeanstalkDenial] returns ""):
// the proxy answers USING/WATCHING as usual, since clients pipeline them
// and skip the reply. A watched tube the client may not consume stays in
// its watch list but is never reserved from; a reserve with no consumable
// watched tube is denied. Worker loops often retry a failed reserve at
// once, so the proxy should hold a denied reserve for its timeout (at most
// a second or so) before answering, rather than let them spin.
package auth
