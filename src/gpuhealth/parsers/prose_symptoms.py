"""A symptom told in words: "nvidia-smi takes forever", "the GPU memory stays occupied after the program ends"; and a
cause named in words: "the module was not built for the new kernel", "there are no headers for this kernel".

People mostly describe what they see, in sentences no program prints. This reader reads such sentences with the
families of wordings in ``knowledge/symptom_phrases.csv`` and says which symptom (``symptoms.csv``) each shows, so the
differential of that symptom can rank its causes; the families of ``knowledge/cause_phrases.csv`` say which cause
(``causes.csv``) a sentence names, read the same way (one engine, one literals index, the same negation, questions,
hypotheticals and history). What it reads is the reporter's words, not machine output: analyze marks the lines it gives
as reported (``MessageLine.reported``), and a finding that rests on them stays below critical.

A sentence shows a symptom only when it says so. It does not when:

- the words are negated just before the predicate ("nvidia-smi is no longer slow", "memory is not occupied");
- it is a question that only asks ("Is nvidia-smi slow without persistence mode?"); one that presupposes the
  symptom ("why is nvidia-smi so slow?", "how do I fix ...") or speaks of the asker's own machine ("my", "we") does;
- it is a hypothetical or general statement ("if persistence is off, nvidia-smi can be slow", "to avoid a login
  loop ..."), unless the writer speaks of their own machine ("if I run nvidia-smi it takes 10 s");
- it tells history ("it was slow before I enabled persistence mode", "the login loop is gone").

Chinese (simplified and traditional, often mixed with English terms) is read the same way, by the table's "-zh"
families: its negation (不/没/沒/未/无 within the few characters before the predicate:
"显存没有被占用", "已经不慢了"), its questions (a question mark, or 吗/是否/会不会/是不是 without one), its
hypotheticals (如果, 容易, 否则, 以免) and its history ("已经解决", "开启持久模式之前"). Chinese has no blanks: a
sentence also ends at 。！？； or at a Latin mark followed at once by a CJK character, a clause at ，： or
但是/可是/不过, and the families' Latin words are bounded by lookarounds on letters (``\b`` sees no boundary between
"GPU" and "温度").

Korean and Japanese are read by the "-ko" and "-ja" families. Both negate after the verb, so in a
sentence holding Hangul or kana the words just after the predicate negate it (Korean -지 않/-지 못/
없/아니, or 안/못 just before the verb: "느리지 않습니다", "안 느려요"; Japanese ない/ません/
なかった/なく: "遅くない", "過熱していません"), and a family whose symptom is itself a negation holds
it in its predicate ("인식되지 않습니다", "認識されない"). A question may end without a mark
(-까요/-나요/-ㄴ가요, ですか/のか) and presupposes the symptom with 왜/어떻게 해결, なぜ/どうすれば;
a conditional (-면, 경우, 수 있; ば/たら/なら, 場合, かもしれ) is a hypothetical unless the writer
speaks of their own machine (제/저희/우리, 私/弊社) or the sentence ends in the past tense
("実行したらエラーが出ました" tells what happened); history is "예전에는"/"以前は" or a solved
("해결되었습니다", "解決しました").

Cost: the text is lower-cased once and searched for the table's literals; a paste holding none of them costs that and
nothing more (the table is read on the first paste that does). A line is tested once per distinct literal
(``literal_rows``: 202 literals index the 89 rows of both tables), not once per row and literal. Each pattern runs once
per sentence that holds one of its literals, with bounded gaps, and at most ``MAX_TRIES`` candidate places per row and
sentence are weighed: linear.
"""

from __future__ import annotations

from bisect import bisect_left

from gpuhealth.lazyre import lazy_re
from gpuhealth.records import record

__all__ = ["MAX_PER_SYMPTOM", "Told", "told_alone", "told_symptoms"]

MAX_LINE = 4096  # characters of one line that are read
MAX_SENTENCE = 600  # characters of one sentence kept as the evidence line
MAX_PER_SYMPTOM = 3  # sentences kept per symptom
MAX_TRIES = 20  # candidate (subject, predicate) places weighed per row and sentence

# a sentence ends at . ! ? ; followed by a blank or the end (an ellipsis "..." does not end one: "--query-gpu=... took
# 10 s"), or at a CJK full stop, question or exclamation mark; Chinese text has no blank after a sentence, so a Latin
# mark followed at once by a CJK character ends one too ("装完驱动就黑屏!重启也没用")
_SENTENCE_END = lazy_re(r"(?<![.])[.!?;][!?]{0,9}(?=\s|$|[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af])|"
                        r"[!?;]{2,10}(?=\s|$)|[。！？；]{1,10}")
# a clause ends at a comma or colon (Latin, full-width or the Japanese 、) or a word that turns it ("but", 但是/可是/
# 不过/然而, Korean 하지만/그런데/-지만/-는데, Japanese しかし/けど/けれど)
_CLAUSE_BREAK = lazy_re(r"[,:，：、]|\bbut\b|\bhowever\b|但是?|可是|不过|不過|然而|"
                        r"하지만|그런데|지만|는데|しかし|けれど|けど")
_WORDY = lazy_re(r"[a-z]{2,}|[\u4e00-\u9fff\u3040-\u30ff\uac00-\ud7af]")
# lines a program printed, not a person (matched lower-cased): log prefixes, tables, prompts, timestamps, glog/klog
# levels ("e0819 07:02:54"), NVRM lines, an exception's line ("RuntimeError: ...", "torch.cuda.OutOfMemoryError: ...")
_MACHINE = lazy_re(r"^\s{0,20}(?:[\[<|+#]|\$ |>>>|\d{2,4}[-/:.]\d|[ewif]\d{4} |nvrm:|"
                   r"(?:info|warn|warning|error|debug|fatal)\b[:\]]?|[a-z_.]{0,80}(?:error|exception|warning):)")
# a program's line anywhere: a syslog or journal line ("mar 06 15:12:17 host prog[2777]: ..."), the driver's NVRM prefix
_MACHINE_ANYWHERE = lazy_re(r"\bkernel: |\bnvrm: |\S\[\d{1,10}\]: |"
                            r"^\s{0,20}(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)\w{0,6} {1,2}\d{1,2} "
                            r"\d\d:\d\d")
# contractions also as people type them without the apostrophe ("doesnt", "cant")
_NEGATION = lazy_re(r"(?:\bnot|n't|\bno|\bnever|\bwithout|\bhardly|\bbarely|\bnor|\bneither|"
                    r"\b(?:do|does|did|is|was|are|were|ca|wo|could|would|should|has|have|had)nt)\b")
# Chinese negation (simplified and traditional) within the last characters before the predicate: 不/没/沒/未/无/無/别,
# but not the words that only start with one ("不断" goes on, "不停", "不少", "不久", "不定时" now and then, "没多久"
# soon, "不到一小时" in less than an hour, "无缘无故" for no reason, "动不动" all the time), nor the middle of a
# question that asks "A or not A" ("是不是", "会不会", "有没有")
_NEGATION_CJK = lazy_re(r"(?<![是会會能要有])[不没沒未无無别別]"
                        r"(?![断斷停少久稳穩知止时時论論管仅僅光定动動得到多缘緣故一])")
CJK_NEGATION_REACH = 4  # characters before the predicate ("显存并没有被占用", "已经不慢了")
# Korean and Japanese negate after the verb, so a sentence in either is negated by the words just after the predicate:
# Korean -지 않/-지 못/없/아니 ("느리지 않습니다", "과열은 없습니다"), Japanese ない/ません/なかった/なく/ず
# ("遅くない", "過熱していません", "消えることはありません"), also after a particle and a verb of its own
# ("과열은 발생하지 않았습니다", "ログインループは起きていない"); a family whose symptom is itself a negation
# ("인식되지 않습니다", "認識されない") holds the negation in its predicate
_NEGATION_AFTER = lazy_re(r"\s?(?:[\uac00-\ud7af]{0,3}?\s?(?:지\s?(?:않|못|마)|없|아니|아닙)|"
                          r"[은는이가도]\s[\uac00-\ud7af]{1,4}?지\s?(?:않|못)|"
                          r"(?:[はがも]|では)?[\u4e00-\u9fff]{0,2}[\u3040-\u309f]{0,8}?"
                          r"(?:ない|ません|なかった|なく|ず(?![\u3040-\u309f])))")
# Korean also negates with 안/못 just before the verb ("안 느려요", "못 찾았")
_NEGATION_KO_BEFORE = lazy_re(r"(?<![\uac00-\ud7af])(?:안|못)\s?$")
_HANGUL = lazy_re(r"[\uac00-\ud7af]")
_KANA = lazy_re(r"[\u3040-\u30ff]")
_FIRST_PERSON = lazy_re(r"\b(?:i|i'm|i've|i'd|my|mine|we|we're|we've|our|ours|us|me)\b|我|咱|本人|"
                        r"(?<![\uac00-\ud7af])(?:저희|우리|저|제|내|나)(?:는|가|의|도)?(?=\s)|私|僕|俺|弊社|当方|"
                        r"うちの|自分の")
# Korean and Japanese conditionals and general statements: -면 (not in 화면 screen, 측면, ...; "어떻게 하면" asks how),
# 경우 (in case), 수 있 (can), ば/たら/なら (not "どうすれば", "どうしたら" how, "ならない" must), 場合, かもしれ,
# 可能性, ことがある; a sentence that ends in the past tense told what happened ("実行したらエラーが出ました")
_MODAL_KOJA = lazy_re(r"(?<![화측표전방단양장정평수지])(?<!어떻게 하)(?<!어떻게하)면(?![\uac00-\ud7af])|경우|"
                      r"수\s?(?:도\s?)?있|(?<!どうす)れば|[けせてめえべげねへ]ば(?![\u3040-\u309f])|"
                      r"(?<!どうし)たら(?![\u3040-\u309f])|(?<!な)なら(?![なず])|場合|かもしれ|可能性|ことがあ")
# a Hangul syllable whose final consonant is ㅆ (했, 됐, 졌, 났, ...): the Korean past tense, but for 있 (is) and 겠
# (will, may)
_KO_PAST = "".join(chr(0xAC00 + 28 * n + 20) for n in range(19 * 21)).replace("있", "").replace("겠", "")
_PAST_END = lazy_re(r"(?:た|かった|[" + _KO_PAST + r"])[\u3040-\u309f\uac00-\ud7af]{0,4}[\s.。!！~]{0,5}$")
# words that make a sentence a hypothetical or a general statement, unless the writer speaks of their own machine
_MODAL = lazy_re(r"\b(?:if|unless|whether|in case|can(?!')|could|may|might)\b|如果|可能|假如|假设|假設|要是|万一|萬一|"
                 r"的话|的話|容易|通常|一般(?:会|會|来说|來說)")
# words that say the symptom is to be avoided, or what would follow otherwise: never a report, even in the first
# person ("how do I avoid ...", "disable Secure Boot first (my board ...), otherwise you may get a login loop")
_PREVENT = lazy_re(r"\b(?:to avoid|to prevent|avoids?|prevents?|avoiding|preventing|otherwise|or else)\b|"
                   r"以免|避免|否则|否則|防止|以防|不然|방지|피하려|予防|防ぐ|避ける|"
                   # what the writer (wrongly) thought, not what they saw: "我原以为是 NCCL 超时" ("怀疑", suspect, is
                   # left out: "我怀疑 nvidia-smi 卡住是因为..." sees the hang and suspects its cause)
                   r"以为|以為")
# only words that say the symptom ENDED: "previously" or "in the past" date an observation ("previously I ran a job and
# the memory stayed occupied"), they do not say it is over; nor does a program being gone ("the process is gone but the
# GPU memory stays used": that is the symptom)
_HISTORY = lazy_re(r"\b(?:used to|before (?:i|we)|until (?:i|we)|went away|back to normal|"
                   r"(?<!process )(?<!processes )(?<!program )(?<!job )(?<!jobs )(?<!pid )(?:is|was|are|were) gone|"
                   r"(?:is|was|got|been|now|are|were) (?:fixed|solved|resolved)|"
                   r"(?:fixed|solved|resolved) (?:it|this|that|the))\b|"
                   # Chinese: solved ("已经解决", "修好了", "恢复正常"), fine again ("重启就好了"), gone ("消失了"), not
                   # again ("没再出现"), and "X之前" before something was done ("开启持久模式之前"; "我之前" and
                   # "三天之前" only date it)
                   r"(?:已经|已經|已|终于|終於|总算|總算)(?:解决|解決|修复|修復|修好|搞定)|"
                   r"(?:解决|解決|修复|修復|修好|搞定)了|恢复正常|恢復正常|(?:就|又|都|已经|已經|现在|現在)好了|"
                   r"消失了|(?:没|沒)再(?:出现|出現)?|不再出(?:现|現)|"
                   r"(?<=[\u3400-\u9fffa-z0-9\])])(?<![我们們他她你天月年周週时時钟鐘久])\s?之前|"
                   # Korean and Japanese: formerly ("예전에는", "以前は"), solved ("해결되었습니다", "解決しました"),
                   # back to normal ("정상으로 돌아왔", "正常に戻")
                   r"예전에(?:는|엔)?|이전에는|以前は|昔は|(?:해결|수정|복구)(?:되었|됐|했|완료)|정상으로\s?(?:돌아|복구)|"
                   r"(?:解決|解消|修正|復旧)(?:しました|した|済|できました)|直りました|直った|治りました|正常に戻")
# in a question, "if"/"whether" before the words: it asks whether they hold ("how do I tell if my GPU throttles?")
_ASKS_WHETHER = lazy_re(r"\b(?:if|whether)\b")
# a question that presupposes the symptom: "why ...", "how come ...", "how do I fix ..." ("why would ..." supposes)
_ASKS_ABOUT_OWN = lazy_re(r"^\W{0,5}(?:why(?! (?:would|could|might|may|can|should)\b)|how come|"
                          r"how (?:to|do i|can i|do we|can we|should i) (?:fix|solve|resolve|"
                          r"debug|troubleshoot|speed up|stop|get rid of|free|release))\b|为什么|为何|怎么办|為什麼|"
                          r"為何|怎麼辦|(?:怎么|怎麼|如何)(?:解决|解決|处理|處理|修复|修復)|怎么回事|怎麼回事|"
                          r"什么原因|什麼原因|咋办|咋辦|왜|어떻게\s?(?:해결|고치|고쳐|해야|하면)|해결\s?방법|"
                          r"なぜ|どうして|どうすれば|どうしたら|解決方法|対処法|原因は")
# a Korean or Japanese question need not end with a question mark: -까/-까요/-나요/-ㄴ가요 (after a syllable ending
# in ㄴ: "느린가요", not "올라가요" goes up), ですか/ますか/のか
_KO_N_FINAL = "".join(chr(0xAC00 + 28 * n + 4) for n in range(19 * 21))
_ASKS_FINAL = lazy_re(r"(?:까요?|나요|(?<=[" + _KO_N_FINAL + r"])가요?|(?<=[\u3040-\u309f])か(?:な|ね)?)"
                      r"[\s.。!！~]{0,5}$")
# a Chinese question need not end with a question mark: 吗, 是否, 会不会, 是不是, 有没有 ask
_ASKS_CJK = lazy_re(r"[吗嗎]|是否|[会會]不[会會]|是不是|有[没沒]有|能不能")

# --- a fix the reporter says worked (knowledge/fix_phrases.csv; a told cause the same sentence says was then fixed)
# words that say it worked: "fixed it", "did the trick", "it works", "it came back" (the GPU after a reseat), Chinese
# "就好了", "解决了", "恢复正常"; "help" too, so that "did not help" is found as the first such word and negates
_SUCCESS_WORDS = (r"\b(?:fix|fixed|fixes|solve|solved|solves|resolve|resolved|resolves|cured|cures|help|helped|helps|"
                   r"worked|works|working|did the trick|does the trick|went away|goes away|(?:is|was|are|were) gone|"
                   r"back to normal|came back|comes back|show(?:s|ed)? up|(?:is|was|got) detected|"
                   r"(?:runs|ran|loads|loaded|boots|booted|starts|started) (?:fine|normally|correctly|again|now))\b|"
                   r"(?:就|又|都|终于|終於|已经|已經)?好了|解决|解決|修复|修復|修好|搞定|恢复正常|恢復正常|正常了|可以了|"
                   r"成功了|解決しました|直りました|해결")
_SUCCESS = lazy_re(_SUCCESS_WORDS)
# words that say only that it works, which a routine step followed by a working GPU says too ("after the driver update I
# rebooted and nvidia-smi works"): a fix only where the words say it did not before ("it ONLY worked after", "now it
# works", "it works AGAIN")
_WEAK_SUCCESS = lazy_re(r"worked|works|working|went away|goes away|(?:is|was|are|were) gone|back to normal|came back|"
                        r"comes back|show(?:s|ed)? up|(?:is|was|got) detected|(?:runs|ran|loads|loaded|boots|booted|"
                        r"starts|started) (?:fine|normally|correctly|again|now)")
_NOT_BEFORE = lazy_re(r"\b(?:only|finally|again|now|at last|eventually)\b")
# "<it worked> by|after <the fix>": the words that say so, ending where the fix's words start ("it only worked after
# I", "which I could only fix by", "solved by")
_SUCCESS_BEFORE = lazy_re(r"(?:" + _SUCCESS_WORDS + r")(?: (?:it|this|that|them|things|everything|again|now|"
                          r"only|finally|eventually|for me|for us|properly|fine|correctly|normally|ok|okay|"
                          r"the (?:problem|issue|error|boot|install|installation|screen|build)))"
                          r"{0,4},? (?:by|after|once|with|through|via|when)(?: (?:i|we|finally|just|simply|only|"
                          r"manually|properly|also|then|having|first))* ?$")
# "the fix was <the fix>", "what solved it was", "SOLVED:", "the solution is to"
_FIX_WAS = lazy_re(r"(?:\b(?:the |my |our |a |one )?(?:fix|solution|answer|workaround|cure|remedy|trick|resolution)"
                   r"(?: for (?:me|us|this|it))?(?: here)? (?:was|is|turned out to be|ended up being)|"
                   r"\bwhat (?:finally |eventually |actually |really |ultimately )?(?:fixed|solved|resolved|helped|"
                   r"worked)(?: it| this| that| the (?:problem|issue))?(?: for (?:me|us))? (?:was|is)|"
                   r"\b(?:solved|fixed|resolved|solution|fix)\s?:|解决方法是|解決方法是|解决办法是|解決辦法是)"
                   r"\W{0,3}(?: ?(?:to|simply|just|by|that|i|we|had to))* ?$")
# "it failed until I <the fix>", "cuInit returns an error until we run <the fix>": the fix made it work
_UNTIL = lazy_re(r"(?<!wait )(?<!waited )(?<!waiting )\b(?:until|till)(?: after)?"
                 r"(?: (?:i|we|finally|manually|just|simply|eventually|first|had to|ran|run))* ?$")
# "it turned out to be <what the fix acts on>", "the culprit was nouveau", "原来是 nouveau": the reporter found it
_CULPRIT = lazy_re(r"(?:\bturn(?:s|ed)? out to be|\bthe (?:root )?(?:cause|culprit) (?:was|turned out to be)|"
                   r"\bthe (?:problem|issue) (?:was|turned out to be)|原来是|原來是|罪魁祸首是|罪魁禍首是)"
                   r"(?: (?:the|a|an|my|our|missing|no|that|just|simply))* ?$")
# "I had to re-enroll the MOK key", "we had to enroll the key again": a step made once more because it was needed is a
# fix the reporter made and that worked, said without "fixed it" (a first "I had to install the headers" may be the
# install procedure, not a fix); "if I had to", "but it still fails" and a question say nothing of the kind
_HAD_TO = lazy_re(r"\b(?:i|we) (?:finally |eventually |then |just |also |simply |manually |actually )?"
                  r"(?:had|needed) to (?:re-?)?$")
_AGAIN_AFTER = lazy_re(r"[^.;!?]{0,60}?\bagain\b")
_BELIEVED = lazy_re(r"\b(?:think|thought|guess|suspect\w*|believe|assume\w*|probably|likely|seems?|maybe|perhaps|"
                    r"possibly)\b|可能|也许|也許|怀疑|懷疑|猜")
# a suggested, hoped or supposed fix, not one that was made: "try blacklisting nouveau", "you should install the
# headers", "if you disable Secure Boot it works" ("could" stays: "which I could only fix by blacklisting")
_SUPPOSED_FIX = lazy_re(r"\b(?:try|if|unless|whether|in case|can|may|might|would|will|should|shall|must|need to|"
                        r"needs to|have to|has to|please|make sure|suggest\w*|recommend\w*|consider|maybe|perhaps|"
                        r"hopefully|supposed to|expected to)\b|'ll\b|如果|要是|假如|试试|試試|建议|建議|应该|應該|需要")
# a fix that only lasted, or that fixed a different, later problem: "it worked for a day, but it broke again", "fixed
# the boot, but now nvidia-smi fails" (a fix that did not last confirms nothing: the problem is back)
_NOT_FOR_GOOD = lazy_re(r"\b(?:broke|breaks|broken|fail\w*|stopped|crash\w*|happen\w*|appear\w*|occur\w*|dropped|"
                        r"drops|"
                        r"died) (?:\w+ ){0,2}?again\b|\bagain (?:after|the next|on the next|a (?:day|week|few))\b|"
                        r"\btemporar\w*|\bfor a (?:while|day|week|few \w+|couple of \w+)\b|\buntil (?:the )?next\b|"
                        r"\bonly for (?:a|one|two|some)\b|\bnot for long\b|\b(?:came|comes) back\b|\breturned\b|"
                        r"\bbut (?:now|then|after|since|soon|later|the next)\b|\bhowever\b|\bstill\b|"
                        r"\b(?:another|a new|a different|the next|a second|new) (?:problem|issue|error|failure)s?\b|"
                        r"\bnow (?:i|we|it) (?:get|gets|got|see|have|fail\w*|crash\w*|hang\w*)\b|"
                        r"又出现|又出現|又坏|又壞|复发|復發|但是现在|但是現在")
# a later sentence of the same paragraph that says the fix was followed by another problem, or did not last:
# "Blacklisting nouveau fixed the boot. Now I get error 999 in PyTorch."
_LATER_PROBLEM = lazy_re(r"\b(?:another|a new|a different|the next|a second) (?:problem|issue|error|failure)s?\b|"
                         r"\bnow (?:i|we) (?:get|got|see|hit|have a)\b|\bbut now\b|"
                         r"\b(?:broke|breaks|fail\w*|fell|falls|dropped|drops|died|crash\w*|stopped|came back|"
                         r"comes back|returned|happen\w*) (?:\w+ ){0,3}?again\b|又出现|又出現|又坏|又壞")
# the reporter found the cause: "it turned out the fabric manager was not running", "the culprit was", "原来是"
_FOUND_CAUSE = lazy_re(r"\bturn(?:s|ed)? out\b|\b(?:the )?(?:root )?(?:cause|culprit) (?:was|turned out to be)\b|"
                       r"\bit was caused by\b|\bfound (?:out )?that\b|原来是|原來是|结果发现|結果發現")
# doubt is a supposition too, in the first person as well: "I doubt the headers are missing", "not sure whether ..."
# ("not sure why, but the GPU fell off the bus" tells it)
# and so is what the writer first thought or assumed ("I thought the headers were missing, but ...", as 以为 above)
_DOUBT = lazy_re(r"\b(?:doubt\w*|unlikely|(?:not sure|unsure) (?:if|whether|that)|"
                 r"(?:i|we) (?:first |initially |originally )?(?:thought|assumed|presumed))\b|不太可能|不认为|不認為")
# an episode dated in the past is history, not the problem now ("Xid 79 happened once in 2022", "last year the GPU fell
# off the bus"), unless the sentence says it goes on or dates from then ("since the update last month")
# (a week or a month ago is often the update that broke it: "last week we moved the cluster to Rocky 9.5"; a bare year
# often dates the machine, not the episode: "we bought the server in 2022 and the GPU overheats")
_DATED = lazy_re(r"\b(?:(?<!the )last year|(?:a|one|two|three|four|five|several|many|\d{1,2}) years? ago|"
                 r"(?:once|back|already|sometime|some time) in (?:early |mid-?|late )?(?:19|20)\d\d)\b")
_STILL_NOW = lazy_re(r"\b(?:since|ever since|again|still|now|currently|today|this (?:week|morning)|keeps?|every)\b")


@record
class Told:
    symptom: str  # a symptoms.csv id ("" where the sentence names a cause)
    phrase: str  # the symptom_phrases.csv (or cause_phrases.csv) row that read it
    sentence: str  # the sentence, as written (at most MAX_SENTENCE characters)
    line: int = 0  # the index of its line in the text (str.splitlines)
    cause: str = ""  # a causes.csv id: the sentence names the cause itself (cause_phrases.csv)
    # the reporter says a fix of the cause worked (fix_phrases.csv, or a cause family's sentence then fixed): the cause
    # is confirmed by their fix, not merely named
    confirmed: bool = False


def told_symptoms(text: str, causes_only: bool = False) -> list[Told]:
    """The symptoms the sentences of ``text`` tell, and the causes they name (``Told.cause``), each at most
    ``MAX_PER_SYMPTOM`` times, in text order; with ``causes_only``, only the causes."""
    lowered = _folded(text)
    from gpuhealth.knowledge.symptom_phrases import literal_rows, literals, phrases

    if not any(literal in lowered for literal in literals()):
        return []
    return _read_lines(text, lowered, phrases(), literal_rows(), causes_only)


def told_alone(text: str, row_id: str) -> list[Told]:
    """The sentences of ``text`` that tell the subject of the cause family ``row_id`` on its own, without its
    predicate: "we upgraded the servers from Ubuntu 22.04 to 24.04" is the event of the family "an OS upgrade broke
    the driver" whose failure may be shown elsewhere in the evidence (nvidia-smi's own message). The same negation,
    questions, hypotheticals, history and ``unless`` apply; what the event means is the caller's to decide
    (analyze keeps it only beside a failure). KeyError for an id no family has."""
    from dataclasses import replace

    from gpuhealth.knowledge.symptom_phrases import phrases

    row = next((r for r in phrases() if r.id == row_id), None)
    if row is None or row.subject is None:
        raise KeyError(row_id)
    lowered = _folded(text)
    if not any(literal in lowered for literal in row.literals):
        return []
    alone = replace(row, predicate=None, window=0)
    return _read_lines(text, lowered, (alone,), tuple((lit, (0,)) for lit in alone.literals), True)


def _read_lines(text: str, lowered: str, rows, index, causes_only: bool) -> list[Told]:
    """:func:`told_symptoms`' reading of ``text`` (``lowered`` is its :func:`_folded` form) with the families ``rows``,
    indexed by ``index`` (each literal with the positions of its rows)."""
    row_scripts = [row.id[-3:] if row.id.endswith(("-ko", "-ja")) else "" for row in rows]
    found: list[Told] = []
    counts: dict[str, int] = {}
    original_lines = text.splitlines()
    for number, line in enumerate(lowered.splitlines()):
        line = line[:MAX_LINE]
        hits = [positions for literal, positions in index if literal in line]
        if not hits:
            continue
        # the Korean ("-ko") and Japanese ("-ja") families' wordings are in their script: a line without Hangul or
        # kana need not run them (an English line that names a GPU holds the literal "gpu" of most of them)
        scripts = {"": True, "-ko": _HANGUL.search(line) is not None, "-ja": _KANA.search(line) is not None}
        candidates = [rows[i] for i in sorted(set().union(*hits)) if scripts[row_scripts[i]]
                      and counts.get(rows[i].key, 0) < MAX_PER_SYMPTOM and (rows[i].cause or not causes_only)]
        if not candidates or _MACHINE.match(line) or _MACHINE_ANYWHERE.search(line) or not _prose(line):
            continue
        original = original_lines[number][:MAX_LINE] if number < len(original_lines) else line
        contexts: dict[str, bool] = {}  # a row's context is the line's: searched once per line, not per sentence
        sentences = _sentences(line)
        read = []
        for i, (start, end, asks) in enumerate(sentences):
            # a sentence closed by ";" goes on in the next one: "nvidia-smi was slow; persistence mode fixed that"
            follow = line[end:sentences[i + 1][1]] if i + 1 < len(sentences) and line[start:end].rstrip().endswith(
                (";", "；")) else ""
            read += [(row, start, end, confirmed) for row, confirmed
                     in _read_sentence(candidates, line, start, end, asks, contexts, follow)
                     if not (confirmed and _LATER_PROBLEM.search(line, end))]  # "... fixed it. Now I get ..."
        for row, start, end, confirmed in _line_yields(read):
            if counts.get(row.key, 0) < MAX_PER_SYMPTOM:
                counts[row.key] = counts.get(row.key, 0) + 1
                found.append(Told(row.symptom, row.id, original[start:end].strip()[:MAX_SENTENCE], number,
                                  row.cause, confirmed))
    return found


def _line_yields(read: list) -> list:
    """The sentences' rows, less a named cause that yields to another cause named in the same line: a story told over
    sentences ("the kernel went from -24 to -25 and the driver broke. Rebuilding it did nothing.") names the narrower
    cause in its later sentence (the driver's source does not build against the kernel), as one sentence would."""
    named = {item[0].cause for item in read if item[0].cause}
    if len(named) < 2:
        return read
    return [item for item in read if not (item[0].cause and (named - {item[0].cause}).intersection(item[0].yields_to))]


def _folded(text: str) -> str:
    """Lower case with typographic apostrophes made plain, the same length as ``text`` (offsets carry over)."""
    lowered = text.lower()
    if len(lowered) != len(text):  # a letter whose lower case is longer ("İ"): letter by letter, keeping the offsets
        lowered = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
    return lowered.replace("\u2019", "'").replace("\u2018", "'")


def _prose(line: str) -> bool:
    """At least three words of letters (or CJK characters): a sentence ("training got slower"), not a value."""
    count = 0
    for _ in _WORDY.finditer(line):
        count += 1
        if count >= 3:
            return True
    return False


def _sentences(line: str) -> list[tuple[int, int, bool]]:
    """(start, end, whether it ends with a question mark) of each sentence of one line."""
    out = []
    start = 0
    for m in _SENTENCE_END.finditer(line):
        out.append((start, m.end(), "?" in m.group() or "？" in m.group()
                    or _ASKS_CJK.search(line, start, m.end()) is not None
                    or _ASKS_FINAL.search(line, start, m.end()) is not None))
        start = m.end()
    if line[start:].strip():
        out.append((start, len(line), _ASKS_CJK.search(line, start) is not None
                    or _ASKS_FINAL.search(line, start) is not None))
    return out


def _read_sentence(rows, line: str, start: int, end: int, asks: bool, contexts: dict[str, bool],
                   follow: str = "") -> list[tuple]:
    """(row, confirmed) for the rows whose family tells its symptom (or names its cause) in ``line[start:end]``, after
    ``yields_to``; ``confirmed``: the sentence says a fix of the cause worked. ``follow``: the next sentence, where this
    one ends with ";"."""
    sentence = line[start:end]
    matched = [(row, status == CONFIRMED) for row in rows
               if (status := _tells(row, line, sentence, asks, contexts, follow))]
    shown = {row.key for row, _ in matched}
    kept = [(row, confirmed) for row, confirmed in matched if not (shown - {row.key}).intersection(row.yields_to)]
    # one row per symptom or cause: the first, unless a later one says a fix of it worked
    best: dict[str, tuple] = {}
    for row, confirmed in kept:
        if row.key not in best or (confirmed and not best[row.key][1]):
            best[row.key] = (row, confirmed)
    return list(best.values())


TOLD, CONFIRMED = "told", "confirmed"  # what a sentence does with a family's words ("": neither)


def _tells(row, line: str, sentence: str, asks: bool, contexts: dict[str, bool], follow: str = "") -> str:
    """Whether ``sentence`` tells the row's symptom or cause (``TOLD``), says a fix of the cause worked
    (``CONFIRMED``), or neither ("")."""
    if not any(literal in sentence for literal in row.literals):
        return ""
    if row.context is not None:
        if row.id not in contexts:
            contexts[row.id] = row.context.search(line) is not None
        if not contexts[row.id]:
            return ""
    if row.unless is not None and row.unless.search(sentence):
        return ""
    if row.fix and _found_what_it_fixes(row, sentence, asks):
        return CONFIRMED
    best = ""
    for place in _places(row, sentence):
        status = (_fix_worked(sentence, place, asks, follow) if row.fix
                  else _reported(sentence, place, asks, follow, bool(row.cause)))
        if status == CONFIRMED:
            return status
        best = best or status
    return best


def _places(row, sentence: str):
    """(predicate start, predicate end, subject start, subject end) of each place where the row's subject and predicate
    meet, at most ``MAX_TRIES`` of them (a row of one pattern: its match, twice)."""
    if row.subject is None or row.predicate is None:
        pattern = row.subject or row.predicate
        for count, m in enumerate(pattern.finditer(sentence)):
            if count >= MAX_TRIES:
                return
            yield m.start(), m.end(), m.start(), m.end()
        return
    subjects = [m.span() for m in row.subject.finditer(sentence)]
    if not subjects:
        return
    starts = [s for s, _ in subjects]
    for tries, m in enumerate(row.predicate.finditer(sentence)):
        if tries >= MAX_TRIES:
            return
        p_start, p_end = m.span()
        i = bisect_left(starts, p_start)
        near = [subjects[j] for j in ((i - 1,) if row.ordered else (i - 1, i)) if 0 <= j < len(subjects)]
        if not near:
            continue
        s, e = min(near, key=lambda span: max(0, span[0] - p_end, p_start - span[1]))
        # an ordered family's subject is the predicate's own: no clause between them ("at 5 it/s, loss goes down")
        if max(0, s - p_end, p_start - e) <= row.window and not (row.ordered and _CLAUSE_BREAK.search(
                sentence, e, p_start)):
            yield p_start, p_end, s, e


def _reported(sentence: str, place: tuple[int, int, int, int], asks: bool, follow: str = "",
              cause: bool = False) -> str:
    """Whether the words at ``place`` (the predicate's span, then the subject's) report the symptom (``TOLD``), rather
    than negate it, ask about it, suppose it or tell that it is over (""). A cause (``cause``) the sentence then says
    was fixed ("the module was not built for the new kernel, but dkms autoinstall fixed it"), or that the reporter
    found ("it turned out the fabric manager was not running"), is ``CONFIRMED``."""
    p_start, p_end, s_start, s_end = place
    clause = _clause_before(sentence, p_start)
    korean_or_japanese = _HANGUL.search(sentence) is not None or _KANA.search(sentence) is not None
    if _NEGATION.search(" ".join(clause.split()[-3:])):
        return ""
    if korean_or_japanese:  # 不/未/無 in a Japanese sentence start words ("未だに" still, "不具合" fault)
        if _NEGATION_AFTER.match(sentence, p_end) or _NEGATION_KO_BEFORE.search(clause[-CJK_NEGATION_REACH:]):
            return ""
    elif _NEGATION_CJK.search(clause[-CJK_NEGATION_REACH:]):
        return ""
    first, second = sorted(((p_start, p_end), (s_start, s_end)))
    outside = " ".join((sentence[:first[0]], sentence[first[1]:second[0]], sentence[second[1]:]))
    if _PREVENT.search(outside) or _DOUBT.search(sentence[:first[0]]) or _dated(sentence):
        return ""
    status = TOLD
    if _HISTORY.search(outside) or (follow and _HISTORY.search(follow)):
        if not (cause and _fixed_after(f"{sentence} {follow}", second[1], across_but=True)):
            return ""
        status = CONFIRMED  # over because a fix worked: the fix confirms the cause
    own = _FIRST_PERSON.search(sentence) is not None
    if not own and (_MODAL.search(sentence[:p_start]) or _MODAL.search(_clause_after(sentence, p_end))):
        return ""
    if not own and korean_or_japanese and _MODAL_KOJA.search(sentence) and not _PAST_END.search(sentence):
        return ""
    if asks and _in_question(sentence, p_start):
        if _ASKS_WHETHER.search(_clause_before(sentence, p_start)):
            return ""  # "how do I know if my torch is a CPU build?" asks whether, whoever's it is
        if not (own or _ASKS_ABOUT_OWN.search(sentence) is not None):
            return ""
    if cause and status == TOLD and _FOUND_CAUSE.search(sentence, 0, first[0]):
        status = CONFIRMED
    return status


def _dated(sentence: str) -> bool:
    """An episode the sentence dates in the past ("once in 2022", "last year") and does not say goes on."""
    return _DATED.search(sentence) is not None and _STILL_NOW.search(sentence) is None


def _negated(text: str, position: int) -> bool:
    """Whether the words just before ``position`` negate it ("did not help", "没有解决")."""
    clause = _clause_before(text, position)
    return bool(_NEGATION.search(" ".join(clause.split()[-3:])) or _NEGATION_CJK.search(clause[-CJK_NEGATION_REACH:]))


def _says_fixed(text: str, start: int, end: int) -> bool:
    """Whether the words ``text[start:end]`` that say it worked say it was broken before: always, but for words that
    only say it works ("it works"), which need "only", "now", "again", "finally" beside them."""
    if _WEAK_SUCCESS.fullmatch(text, start, end) is None:
        return True
    return _NOT_BEFORE.search(text, max(0, start - 40), min(len(text), end + 20)) is not None


def _fixed_after(text: str, position: int, across_but: bool = False) -> bool:
    """Whether the words after ``position`` say it worked ("... fixed it", "after that it works"), not negated, not
    supposed, not only for a while; ``across_but``: the words may follow a "but" ("X was missing, but installing it
    fixed it")."""
    m = _SUCCESS.search(text, position)
    if m is None or m.start() - position > 100 or _negated(text, m.start()) or _SUPPOSED_FIX.search(
            text, position, m.end()):
        return False  # "... might fix it", "... should work"
    if not _says_fixed(text, m.start(), m.end()):
        return False
    if not across_but and _BUT.search(text, position, m.start()):
        return False  # "I blacklisted nouveau but reinstalling fixed it": another fix worked
    return _NOT_FOR_GOOD.search(text, m.end()) is None


_BUT = lazy_re(r"\bbut\b|\bhowever\b|但|可是|不过|不過")


def _fix_worked(sentence: str, place: tuple[int, int, int, int], asks: bool, follow: str = "") -> str:
    """``CONFIRMED`` when the fix at ``place`` (a fix_phrases.csv row: the predicate's span is the verb, the subject's
    what it acts on) is one the reporter says worked: "blacklisting nouveau fixed it", "it only worked after I installed
    the headers", "the solution was to disable Secure Boot", "把 nouveau 禁用后就好了"; not one that did not work, a
    suggestion, a question, a fix that only lasted a while or one of a later problem ("")."""
    p_start, p_end, s_start, s_end = place
    if asks or not _joined(sentence, place):
        return ""
    start, end = min(p_start, s_start), max(p_end, s_end)
    clause = _clause_before(sentence, start)
    if _NEGATION.search(" ".join(clause.split()[-3:])) or _NEGATION_CJK.search(clause[-CJK_NEGATION_REACH:]):
        return ""  # "without blacklisting nouveau", "not even reseating the card"
    if _dated(sentence):
        return ""
    text = f"{sentence} {follow}" if follow else sentence
    if not _supposed(sentence, start, start) and _fixed_after(text, end):
        return CONFIRMED
    for cut in dict.fromkeys((start, p_start)):
        before = _SUCCESS_BEFORE.search(sentence, max(0, cut - 120), cut)
        word = _SUCCESS.match(sentence, before.start()) if before is not None else None
        framed = word is not None and not _negated(sentence, word.start()) and _says_fixed(sentence, *word.span())
        frame = word if framed else (_FIX_WAS.search(sentence, max(0, cut - 120), cut)
                                     or _UNTIL.search(sentence, max(0, cut - 60), cut))
        if frame is not None and not _supposed(sentence, frame.start(), cut) and not _NOT_FOR_GOOD.search(text, end):
            return CONFIRMED
    had = _HAD_TO.search(sentence, max(0, start - 60), start)
    again = had is not None and (had[0].endswith(("re", "re-")) or sentence.startswith("re", p_start)
                                 or _AGAIN_AFTER.match(sentence, end) is not None)
    if again and not _supposed(sentence, had.start(), had.start()) and not _NOT_FOR_GOOD.search(text, end):
        return CONFIRMED
    return ""


def _supposed(sentence: str, start: int, end: int) -> bool:
    """Whether a suggestion or a supposition ("try", "you should", "if", "might") stands in the few words before
    ``start`` or between it and ``end``: the fix was proposed, not made. Only the last words before: "it would default
    to nouveau, which I could only fix by blacklisting" tells a habit, then a fix made."""
    lead = sentence[max(0, start - 60):start].split()[-4:]
    return bool(_SUPPOSED_FIX.search(" ".join(lead)) or _SUPPOSED_FIX.search(sentence, start, end))


def _found_what_it_fixes(row, sentence: str, asks: bool) -> bool:
    """Whether the sentence says the reporter found what the fix row acts on to be the culprit: "it turned out to be
    Secure Boot", "the culprit was the nouveau driver", "原来是 nouveau"; only a subject that names it by one of the
    row's literals (not a bare "the card"), not believed or supposed ("I think the problem was nouveau")."""
    if asks or row.subject is None or _dated(sentence):
        return False
    for count, m in enumerate(row.subject.finditer(sentence)):
        if count >= MAX_TRIES:
            return False
        if not any(literal in m.group() for literal in row.literals):
            continue
        frame = _CULPRIT.search(sentence, max(0, m.start() - 60), m.start())
        if frame is not None and not _negated(sentence, frame.start()) and not _BELIEVED.search(
                sentence, 0, m.start()) and not _supposed(sentence, frame.start(), frame.start()):
            return True
    return False


def _joined(sentence: str, place: tuple[int, int, int, int]) -> bool:
    """Whether a fix's verb acts on its subject: "blacklisting (the) nouveau" (the verb first, a few words apart in one
    clause), "nouveau blacklisting", or what it acts on named first and the verb after a fix that worked ("nouveau,
    which I could only fix by blacklisting")."""
    p_start, p_end, s_start, s_end = place
    if p_start < s_end and s_start < p_end:
        return True  # one span holds both ("nvidia-smi -pm 1")
    if p_start >= s_end:
        return p_start - s_end <= 3 or _SUCCESS_BEFORE.search(sentence, s_end, p_start) is not None
    gap = sentence[p_end:s_start]
    return len(gap) <= 25 and not _CLAUSE_BREAK.search(gap) and not _SUCCESS.search(gap)


def _clause_after(sentence: str, position: int) -> str:
    """The rest of the clause from ``position`` (up to the next comma, colon or "but")."""
    m = _CLAUSE_BREAK.search(sentence, position)
    return sentence[position:m.start() if m else len(sentence)]


def _clause_before(sentence: str, position: int) -> str:
    """The words of the clause before ``position`` (from the last comma, colon or "but"), at most 40 characters."""
    window = sentence[max(0, position - 40):position]
    cut = 0
    for m in _CLAUSE_BREAK.finditer(window):
        cut = m.end()
    return window[cut:]


def _in_question(sentence: str, position: int) -> bool:
    """Whether ``position`` lies in the sentence's last clause, the one its question mark closes ("nvidia-smi is slow,
    is that persistence?" reports, then asks)."""
    last = 0
    for m in _CLAUSE_BREAK.finditer(sentence):
        last = m.end()
    return position >= last
