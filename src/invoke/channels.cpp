// The receiving side of the Messenger protocol (FIFO consumption, release pushes, splicing of
// new chunks) and MessengerGlobal (channels): the per-thread table the invoke layer installs as
// fabric's thread extension. One file for both (their classes have a header each): every poll
// goes from channels::poll into inbound_channel::poll, and in two translation units the compiler
// generates other code for both (it no longer sees what the other one touches).
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <seriema/base/error.hpp>
#include <seriema/transfer/arena.hpp>
#include <seriema/transfer/ucx.hpp>
#include <seriema/fabric/runtime.hpp>
#include <seriema/invoke/invoke.hpp>
#include <seriema/invoke/detail/messenger.hpp>
#include <seriema/fabric/detail/scratch.hpp>
#include <optional>

namespace seriema::invoke {

namespace {

std::unique_ptr<fabric::thread_extension> make_channels(thread_context& self) {
  return std::make_unique<channels>(self);
}

// Installed before main: every worker thread_context gets its channels, so a thread receives
// one-sided calls whether or not it ever sends one.
const bool installed = [] {
  (void)fabric::register_thread_layer({"invoke.channels", fabric::layer_slot::invoke_channels,
                                       fabric::layer_scope::workers, &make_channels});
  return true;
}();

// Runs `action` when the scope ends, normally or by an exception.
template <class Action>
struct on_exit {
  Action action;
  ~on_exit() { action(); }
};
template <class Action>
on_exit(Action) -> on_exit<Action>;

const messenger_options& environment_options() {
  static const messenger_options options = messenger_options::from_environment();
  return options;
}

}  // namespace

// ---------------------------------------------------------------- inbound_channel

inbound_channel::inbound_channel(channels& owner, std::uint32_t sender,
                                 std::vector<fabric::granted_memory> first)
    : owner_(owner), sender_(sender) {
  adopt(first, 0);
  const auto* header = reinterpret_cast<const wire::chunk_header*>(ring_.front().memory.memory.data);
  feedback_locator_ = header->setup.feedback;
}

inbound_channel::~inbound_channel() {
  feedback_.reset();
  fabric::runtime& rt = owner_.self().rt();
  for (chunk& c : ring_) {
    (void)rt.service_free(reinterpret_cast<std::uint64_t>(c.memory.memory.data), c.memory.memory.size);
  }
}

void inbound_channel::adopt(std::vector<fabric::granted_memory>& batch, std::size_t position) {
  std::vector<chunk> fresh;
  for (auto& g : batch) {
    chunk c;
    c.memory = g;
    c.header = reinterpret_cast<wire::chunk_header*>(g.memory.data);
    c.data = g.memory.data + wire::chunk_header_size;
    // Capacity from our own allocation (not from anything a peer wrote).
    c.capacity = g.memory.size - wire::chunk_header_size;
    fresh.push_back(c);
  }
  ring_.insert(ring_.begin() + static_cast<std::ptrdiff_t>(position), fresh.begin(), fresh.end());
}

std::vector<std::uint64_t> inbound_channel::chunk_addresses() const {
  std::vector<std::uint64_t> out;
  for (const chunk& c : ring_) out.push_back(reinterpret_cast<std::uint64_t>(c.memory.memory.data));
  return out;
}

void inbound_channel::notify(thread_context& self, std::uint32_t word, std::uint64_t value) {
  if (!feedback_) {
    const int process = static_cast<int>(feedback_locator_.process);
    if (process < 0 || process >= self.rt().size()) return;
    feedback_ = std::make_unique<transfer::remote_memory>(
        self.endpoint_to(process), feedback_locator_, self.rt().same_machine(process));
    const remote_notice choice = owner_.options().notices_remote;
    notices_by_atomic_ = choice == remote_notice::atomic ||
                         (choice == remote_notice::automatic && self.rt().context().network_rdma());
  }
  const std::uint64_t offset = std::uint64_t{word} * 8;
  if (!feedback_->contains(offset, 8)) {
    ++owner_.receive_counts().rejected_record;  // a notify word outside the sender's area
    return;
  }
  if (std::byte* direct = feedback_->direct(); direct != nullptr) {
    std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(direct + offset))
        .fetch_add(value, std::memory_order_acq_rel);
    return;
  }
  // Not mappable (another machine): a one-sided atomic add into the sender's word, or an active
  // message the sender's process applies (remote_notice says why not always the atomic).
  if (notices_by_atomic_ && post_atomic_notice(offset, value)) return;
  ++owner_.receive_counts().notices_by_message;
  owner_.send_feedback(feedback_->endpoint(), sender_, word, value);
}

bool inbound_channel::post_atomic_notice(std::uint64_t offset, std::uint64_t value) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
  param.datatype = ucp_dt_make_contig(sizeof(std::uint64_t));
  // A non-fetching atomic: UCX copies the operand before returning; the request (if any) is
  // released now and completes on its own.
  void* request = ucp_atomic_op_nbx(feedback_->endpoint().handle(), UCP_ATOMIC_OP_ADD, &value, 1,
                                    feedback_->address() + offset, feedback_->rkey(), &param);
  if (UCS_PTR_IS_ERR(request)) return false;  // the endpoint failed: the message path says so
  if (request != nullptr) ucp_request_free(request);
  ++owner_.receive_counts().notices_by_atomic;
  return true;
}

void inbound_channel::release_chunk(thread_context& self) {
  ++owner_.receive_counts().chunks_released;
  // Our `released` word in the sender's feedback area is indexed by our id (see channels).
  notify(self, self.id() + 1, 1);
}

std::size_t inbound_channel::run_range(thread_context& self, chunk& c, std::uint64_t end) {
  std::size_t ran = 0;
  running_ = true;
  on_exit reset_running{[this] { running_ = false; }};
  receive_counters& counts = owner_.receive_counts();
  wire::function_lookup functions;
  while (read_offset_ < end) {
    wire::parsed_record rec =
        wire::parse_record({c.data + read_offset_, end - read_offset_}, functions);
    switch (rec.status) {
      case wire::parse_status::malformed:
        // No trustworthy size: nothing after it in this published range can be framed.
        ++counts.rejected_malformed;
        owner_.count_consumed(1);
        read_offset_ = end;
        continue;
      case wire::parse_status::unknown_function:
        ++counts.rejected_unknown_function;
        owner_.count_consumed(rec.calls);
        read_offset_ += rec.size();
        fabric::report_unknown_function(self, sender_, rec.header.function);
        if ((rec.header.flags & wire::flag_reply) != 0) {
          self.send_failure(sender_, rec.reply.slot, rec.reply.generation,
                            fabric::outcome::not_executed);
        }
        continue;
      case wire::parse_status::bad_record:
        ++counts.rejected_record;
        owner_.count_consumed(rec.calls);
        read_offset_ += rec.size();
        continue;
      case wire::parse_status::ok:
        break;
    }
    if ((rec.header.flags & wire::flag_repeated) != 0) {
      ran += run_repeated(self, rec);
      continue;
    }
    // Advance first: a nested poll (from the function) skips this channel while it runs, and the
    // chunk is not released before the whole lap was consumed, so rec's bytes stay valid.
    read_offset_ += rec.size();
    if ((rec.header.flags & wire::flag_reply) != 0) {
      ran += run_returning(self, rec);
      continue;
    }
    // A plain call: no result (parse_record refused a result size without a reply slot).
    fabric::invocation call{&self, sender_, rec.buffer, {}};
    {
      // Counted once the function returned or threw (see run_repeated).
      on_exit counted{[&] {
        ++ran;
        ++counts.calls;
        owner_.count_consumed(1);
      }};
      thread_context::deferring_scope running(self);
      rec.entry->invoke(rec.closure, call);
    }
    if ((rec.header.flags & wire::flag_notify) != 0) notify(self, rec.notify.counter, wire::count_down_one);
  }
  return ran;
}

std::size_t inbound_channel::run_returning(thread_context& self, const wire::parsed_record& rec) {
  alignas(16) std::byte result[256];
  std::vector<std::byte> big_result;
  std::span<std::byte> result_span;
  if (rec.entry->result_size != fabric::variable_result_size) {
    if (rec.entry->result_size <= sizeof result) {
      result_span = {result, rec.entry->result_size};
    } else {
      big_result.resize(rec.entry->result_size);
      result_span = big_result;
    }
  }
  fabric::reply_channel reply{rec.reply.slot, rec.reply.generation};
  // A serialized value's bytes, kept until the reply went: its send may wait for room and run
  // calls meanwhile, whose replies lease buffers of their own.
  std::optional<fabric::detail::scratch_lease> reply_bytes;
  if (rec.entry->result_size == fabric::variable_result_size) {
    reply.storage = &reply_bytes.emplace().bytes();
  }
  fabric::invocation call{&self, sender_, rec.buffer, result_span, &reply};
  {
    // Counted once the function returned or threw (see run_repeated).
    on_exit counted{[&] {
      ++owner_.receive_counts().calls;
      owner_.count_consumed(1);
    }};
    try {
      thread_context::deferring_scope running(self);
      rec.entry->invoke(rec.closure, call);
    } catch (...) {
      // The caller's slot fails rather than waiting for ever; the exception goes on to the
      // poll that ran the call. send_failure runs no calls while it waits (a call that threw
      // in a nested poll here would abandon this handler, and the notice with it).
      self.send_failure(sender_, rec.reply.slot, rec.reply.generation);
      throw;
    }
  }
  // The wrapper may have pointed the result at bytes of its own (a serialized value).
  detail::finish_reply(self, sender_, reply, call.result);
  if ((rec.header.flags & wire::flag_notify) != 0) notify(self, rec.notify.counter, wire::count_down_one);
  return 1;
}

std::size_t inbound_channel::run_repeated(thread_context& self, const wire::parsed_record& rec) {
  // read_offset_ stays at the record until all of its closures ran: a function that throws
  // leaves repeat_next_ at the first closure not started, and the next poll parses the same
  // (published, hence unchanging) record again and resumes there. Nested polls skip the channel
  // (running_) meanwhile. Calls are counted once their function returned (or threw), never
  // before: a count taken earlier could let runtime::run see the job quiet while one still runs.
  const std::uint32_t first = repeat_next_;
  {
    on_exit counted{[&] {
      owner_.receive_counts().calls += repeat_next_ - first;
      owner_.count_consumed(repeat_next_ - first);
    }};
    const fabric::invocation call{&self, sender_, {}, {}};
    thread_context::deferring_scope running(self);
    rec.entry->invoke_repeated(rec.closure, rec.calls, call, repeat_next_);
  }
  repeat_next_ = 0;
  read_offset_ += rec.size();
  return rec.calls - first;
}

std::size_t inbound_channel::poll(thread_context& self, std::uint64_t& bytes) {
  if (running_) return 0;
  std::size_t ran = 0;
  for (;;) {
    chunk& c = ring_[current_];
    const std::uint64_t word = std::atomic_ref<std::uint64_t>(c.header->producer.published)
                                   .load(std::memory_order_acquire);
    switch (wire::check_published(word, c.lap, c.capacity, read_offset_)) {
      case wire::word_status::stale:
        return ran;
      case wire::word_status::invalid:
        if (word != last_bad_word_) {
          last_bad_word_ = word;
          ++owner_.receive_counts().rejected_malformed;
          owner_.count_consumed(1);
        }
        return ran;
      case wire::word_status::fresh:
        break;
    }
    const std::uint64_t end = wire::published_offset(word);
    if (end > read_offset_) {
      const std::uint64_t from = read_offset_;
      ran += run_range(self, c, end);
      bytes += read_offset_ - from;
      // Consumer part: only this thread writes it.
      std::atomic_ref<std::uint64_t>(c.header->consumer.consumed)
          .store(wire::make_published(read_offset_, c.lap, false, false), std::memory_order_release);
    }
    if ((word & wire::full_bit) == 0 || read_offset_ != end) return ran;
    if ((word & wire::splice_bit) != 0) {
      // The sender grew the ring after this chunk: its next batch goes right here, in the same
      // place as in the sender's ring. The batch was granted before the sender learned of it.
      const std::uint64_t run = self.run_epoch();
      const std::uint32_t sender = sender_;
      const std::uint32_t batch = next_batch_;
      std::vector<fabric::granted_memory> fresh = self.state().take_granted(
          [&](const fabric::granted_memory& g) {
            return g.sender == sender && g.run == run && g.batch == batch;
          });
      if (fresh.empty()) return ran;  // not visible yet: look again at the next poll
      c.lap = wire::next_lap(c.lap);
      adopt(fresh, current_ + 1);  // (invalidates c)
      ++next_batch_;
    } else {
      c.lap = wire::next_lap(c.lap);
    }
    release_chunk(self);
    current_ = (current_ + 1) % ring_.size();
    read_offset_ = 0;
  }
}

// ---------------------------------------------------------------- channels

channels::channels(thread_context& self)
    : self_(self),
      options_(environment_options()),
      // An attached context outlives runs: its channels are made anew for each (renew_layer).
      run_epoch_(self.rt().is_attached_id(self.id()) ? self.rt().run_epoch() : self.run_epoch()) {
  fabric::runtime& rt = self.rt();
  const std::size_t threads = rt.placement().thread_count();
  first_synchronizer_word_ = static_cast<std::uint32_t>(threads + 1);
  const std::size_t words = threads + 1 + synchronizer_words;
  const std::size_t bytes = (words * 8 + 4095) / 4096 * 4096;
  const int zone = rt.is_attached_id(self.id()) ? rt.placement().zone_of_process(rt.rank())
                                                : rt.placement().locate(self.id()).zone;
  feedback_ = rt.service_allocate(zone, bytes);
  if (!feedback_) {
    throw error(fmt::format("thread {}: no registered memory for its feedback words", self.id()));
  }
  std::memset(feedback_.data, 0, feedback_.size);
  feedback_locator_ = transfer::remote_memory_locator::make(rt.rank(), feedback_);
  {
    fabric::local_thread_state& state = self.state();
    std::lock_guard lock(state.feedback_mutex);
    state.feedback_words = feedback_words();
    state.feedback_count = feedback_.size / 8;
  }
  for (std::uint32_t w = static_cast<std::uint32_t>(feedback_.size / 8); w-- > first_synchronizer_word_;) {
    free_counter_words_.push_back(w);
  }
  out_.resize(threads);
  // Senders are workers and attached threads (the offload engine's executors); receivers are
  // workers only.
  in_.resize(threads + static_cast<std::size_t>(rt.size()) *
                           static_cast<std::size_t>(rt.options().attach_slots));
}

channels::~channels() {
  fabric::runtime& rt = self_.rt();
  fabric::detail::staged_sends& staged = self_.state().staged;
  for (auto& read : reads_) {
    // The runtime ended with a read in flight (only after an error; UCX 1.13 cannot cancel
    // it): the thread keeps its buffer until UCX completed it.
    if (read->request == nullptr) continue;
    if (ucp_request_check_status(read->request) == UCS_INPROGRESS) {
      void* request = read->request;
      staged.leave(-1, std::shared_ptr<const void>(std::move(read)), request);
      continue;
    }
    ucp_request_free(read->request);
  }
  reads_.clear();
  {
    fabric::local_thread_state& state = self_.state();
    std::lock_guard lock(state.feedback_mutex);
    state.feedback_words = nullptr;
    state.feedback_count = 0;
  }
  // Notices still queued (a congested socket, a partition) read their headers here: the thread
  // keeps the slots until UCX sent them (or failed them with their peer).
  auto slots = std::make_shared<std::deque<feedback_slot>>(std::move(feedback_slots_));
  for (feedback_slot& slot : *slots) {
    if (slot.request == nullptr) continue;
    if (ucp_request_check_status(slot.request) == UCS_INPROGRESS) {
      staged.leave(-1, slots, slot.request);
    } else {
      ucp_request_free(slot.request);
    }
    slot.request = nullptr;
  }
  with_queue_.clear();
  created_.clear();
  out_.clear();
  in_list_.clear();
  in_.clear();
  // Chunks granted to us this run that no channel adopted (the sender never got to use them).
  for (auto& g : self_.state().take_granted(
           [run = run_epoch_](const fabric::granted_memory& m) { return m.run == run; })) {
    (void)rt.service_free(reinterpret_cast<std::uint64_t>(g.memory.data), g.memory.size);
  }
  (void)rt.service_free(reinterpret_cast<std::uint64_t>(feedback_.data), feedback_.size);
}

void channels::send_feedback(transfer::ucx_endpoint& endpoint, std::uint32_t thread,
                             std::uint32_t word, std::uint64_t value) {
  feedback_slot* free_slot = &feedback_slots_[next_feedback_slot_];
  if (free_slot->request != nullptr &&
      ucp_request_check_status(free_slot->request) == UCS_INPROGRESS) {
    self_.worker().progress();
  }
  if (free_slot->request != nullptr &&
      ucp_request_check_status(free_slot->request) == UCS_INPROGRESS) {
    // As many notices later and still queued (a congested socket, a partition): one more slot.
    free_slot = &feedback_slots_.emplace_back();
  } else {
    next_feedback_slot_ = (next_feedback_slot_ + 1) % feedback_slots_.size();
    if (free_slot->request != nullptr) ucp_request_free(free_slot->request);
    free_slot->request = nullptr;
  }
  feedback_slot& slot = *free_slot;
  slot.message = {thread, word, value};
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_AM_SEND_FLAG_EAGER;
  void* request = ucp_am_send_nbx(endpoint.handle(), fabric::am_id_feedback, &slot.message,
                                  sizeof slot.message, nullptr, 0, &param);
  // An error means the sender's process died: nobody waits for the word any more.
  if (request != nullptr && !UCS_PTR_IS_ERR(request)) slot.request = request;
}

namespace {

using json = nlohmann::ordered_json;

json counters_object(const messenger_counters& c) {
  return json{{"calls", c.calls},         {"repeated", c.repeated},
              {"bytes", c.bytes},         {"publishes", c.publishes},
              {"chunks_grown", c.chunks_grown}, {"full", c.full},
              {"exceeding", c.exceeding}, {"exceeding_peak_bytes", c.exceeding_peak_bytes},
              {"exceeding_uncopied", c.exceeding_uncopied},
              {"exceeding_copied", c.exceeding_copied},
              {"exceeding_direct", c.exceeding_direct}};
}

json counters_object(const receive_counters& c) {
  return json{{"calls", c.calls},
              {"rejected_malformed", c.rejected_malformed},
              {"rejected_record", c.rejected_record},
              {"rejected_unknown_function", c.rejected_unknown_function},
              {"chunks_released", c.chunks_released},
              {"failed_reads", c.failed_reads},
              {"failed_puts", c.failed_puts},
              {"chunks_reclaimed", c.chunks_reclaimed},
              {"notices_by_atomic", c.notices_by_atomic},
              {"notices_by_message", c.notices_by_message}};
}

}  // namespace

std::string messenger_counters::to_json() const { return counters_object(*this).dump(); }

std::string receive_counters::to_json() const { return counters_object(*this).dump(); }

std::string channels::counters_json() const {
  json sent = json::array();
  for (const messenger* m : created_) {
    json entry{{"destination", m->destination()}, {"direct", m->direct()}, {"chunks", m->chunks()}};
    entry.update(counters_object(m->counters()));
    sent.push_back(std::move(entry));
  }
  return json{{"thread", self_.id()}, {"sent", std::move(sent)},
              {"received", counters_object(received_)}}
      .dump();
}

void channels::notify_thread(thread_id thread, std::uint32_t word, std::uint64_t value) {
  fabric::runtime& rt = self_.rt();
  // Workers and attached threads (an offload executor's consumption-notified calls).
  const int process = rt.process_of_thread(thread);
  if (process < 0 || (thread >= self_.thread_count() && !rt.is_attached_id(thread))) return;
  if (rt.is_local(thread)) {
    if (!rt.local_state(thread).add_feedback(word, value)) {
      rt.counters().rejected_feedback.fetch_add(1, std::memory_order_relaxed);
    }
    return;
  }
  if (thread < in_.size() && in_[thread]) {
    // A channel from that thread knows its feedback area: the notice takes the channel's path
    // (a one-sided atomic where SERIEMA_REMOTE_NOTICES chooses it).
    in_[thread]->notify(self_, word, value);
    return;
  }
  transfer::ucx_endpoint& endpoint = self_.endpoint_to(process);
  if (endpoint.failed()) return;  // nobody waits on a dead process's words
  ++received_.notices_by_message;
  send_feedback(endpoint, thread, word, value);
}

void channels::read_async(const transfer::remote_memory_locator& origin, read_done done) {
  fabric::runtime& rt = self_.rt();
  auto read = std::make_unique<pending_read>();
  read->done = std::move(done);
  const int process = origin.process;
  bool failed = process < 0 || process >= rt.size();
  if (!failed) {
    transfer::ucx_endpoint& endpoint = self_.endpoint_to(process);
    transfer::remote_memory remote(endpoint, origin, rt.same_machine(process));
    read->bytes.resize(static_cast<std::size_t>(origin.size));
    if (remote.direct() != nullptr) {
      std::memcpy(read->bytes.data(), remote.direct(), read->bytes.size());
    } else {
      ucp_request_param_t param{};
      void* get = ucp_get_nbx(endpoint.handle(), read->bytes.data(), read->bytes.size(),
                              remote.address(), remote.rkey(), &param);
      if (UCS_PTR_IS_ERR(get)) {
        failed = true;
      } else {
        read->request = get;  // null: completed at once
      }
    }
  }
  if (failed) {
    ++received_.failed_reads;
    read->failed = true;
  }
  // Finished on a later poll even when complete now: the caller is a running call, and the
  // continuation must not run nested inside it.
  count_sent(1);
  reads_.push_back(std::move(read));
}

void channels::put_async(std::span<const std::byte> source,
                         const transfer::remote_memory_locator& target, read_done done) {
  fabric::runtime& rt = self_.rt();
  auto put = std::make_unique<pending_read>();
  put->done = std::move(done);
  put->is_put = true;
  const int process = target.process;
  bool failed = process < 0 || process >= rt.size() || self_.endpoint_to(process).failed();
  if (!failed) {
    transfer::ucx_endpoint& endpoint = self_.endpoint_to(process);
    transfer::remote_memory remote(endpoint, target, rt.same_machine(process));
    if (!remote.contains(0, source.size())) {
      failed = true;
    } else if (remote.direct() != nullptr) {
      std::memcpy(remote.direct(), source.data(), source.size());
      std::atomic_thread_fence(std::memory_order_release);  // before the call that names it
    } else {
      ucp_request_param_t param{};
      void* request = ucp_put_nbx(endpoint.handle(), source.data(), source.size(),
                                  remote.address(), remote.rkey(), &param);
      if (UCS_PTR_IS_ERR(request)) {
        failed = true;
      } else {
        if (request != nullptr) ucp_request_free(request);
        // Remote completion: the flush completes once the bytes are in the target's memory.
        void* flush = ucp_ep_flush_nbx(endpoint.handle(), &param);
        failed = UCS_PTR_IS_ERR(flush);
        if (!failed) put->request = flush;  // null: complete at once
      }
    }
  }
  if (failed) {
    ++received_.failed_puts;
    put->failed = true;
  }
  count_sent(1);  // finished on a later poll, as reads are
  reads_.push_back(std::move(put));
}

void channels::count_failed(const pending_read& read) noexcept {
  ++(read.is_put ? received_.failed_puts : received_.failed_reads);
}

std::size_t channels::finish_reads() {
  std::size_t ran = 0;
  // By index, and each entry taken out before its continuation runs: a continuation may start
  // reads (or poll, and so come back here).
  for (std::size_t i = 0; i < reads_.size();) {
    pending_read& read = *reads_[i];
    bool ok = !read.failed;
    if (read.request != nullptr) {
      const ucs_status_t status = ucp_request_check_status(read.request);
      if (status == UCS_INPROGRESS) {
        ++i;
        continue;
      }
      ucp_request_free(read.request);
      read.request = nullptr;
      if (status != UCS_OK) {
        ok = false;
        count_failed(read);
      }
    }
    std::unique_ptr<pending_read> taken = std::move(reads_[i]);
    reads_.erase(reads_.begin() + static_cast<std::ptrdiff_t>(i));
    if (ok) {
      taken->done(self_, taken->bytes, true);
    } else {
      taken->done(self_, {}, false);
    }
    count_consumed(1);
    ++ran;
  }
  return ran;
}

void channels::set_options(const messenger_options& options) {
  options.validate();
  options_ = options;
}

messenger& channels::create(thread_id dest) {
  if (dest >= out_.size()) {
    throw error(fmt::format("messenger: thread {} does not exist (the job has {} threads)", dest,
                            out_.size()));
  }
  auto& slot = out_[dest];
  slot = std::make_unique<messenger>(*this, dest, static_cast<std::uint32_t>(dest + 1));
  created_.push_back(slot.get());
  return *slot;
}

inbound_channel* channels::inbound_from(thread_id sender) noexcept {
  return sender < in_.size() ? in_[sender].get() : nullptr;
}

namespace {
// Temporal slipping (FastForward, Giacomoni et al., PPoPP 2008). A receiver that keeps pace with
// a sender of large records reads the chunk's published word right after every publish, so each
// of the sender's publishes must take that cache line back first; while it copies 256-byte
// closures, that is what bounds the sender (write at 256 B: 57-71 M calls/s keeping pace,
// 100 M letting the sender get ahead; docs/performance.md). So after a poll whose calls came in
// records of `slip_record_bytes` or more on average, the thread pauses for about a tenth of a
// microsecond before it looks again: the senders publish a few records meanwhile, and the
// next poll runs them together. Smaller records leave the receiver the bottleneck (no pause);
// a call that expects a reply has sent it before the pause.
constexpr std::uint64_t slip_record_bytes = 128;
inline void slip_behind_senders() noexcept {
  for (int i = 0; i < 4; ++i) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#else
    std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
  }
}
}  // namespace

std::size_t channels::poll(thread_context& self) {
  std::size_t ran = 0;
  if (reclaim_pending_) reclaim_dead_senders(self);
  fabric::local_thread_state& state = self.state();
  const std::size_t grants = state.first_grants.load(std::memory_order_acquire);
  if (grants != new_channels_seen_) {
    // New senders: their first batch of chunks is in our incoming memory map. (Entries of a
    // later run, granted by a process that is already there, stay for that run's channels.)
    const std::uint64_t run = self.run_epoch();
    std::vector<fabric::granted_memory> firsts = state.take_granted(
        [&](const fabric::granted_memory& g) { return g.batch == 0 && g.run == run; });
    // A grant still being linked may hide one counted in `grants`: then look again next poll.
    if (!state.grant_in_flight()) new_channels_seen_ = grants;
    std::size_t i = 0;
    while (i < firsts.size()) {
      const std::uint32_t sender = firsts[i].sender;
      std::vector<fabric::granted_memory> batch;
      while (i < firsts.size() && firsts[i].sender == sender) batch.push_back(firsts[i++]);
      if (sender >= in_.size() || in_[sender]) {
        // Not a sender we can have (or a second channel from it in one run): give it back.
        for (auto& g : batch) {
          (void)self.rt().service_free(reinterpret_cast<std::uint64_t>(g.memory.data),
                                       g.memory.size);
        }
        continue;
      }
      in_[sender] = std::make_unique<inbound_channel>(*this, sender, std::move(batch));
      in_list_.push_back(in_[sender].get());
    }
  }
  // By index: a call run here may poll again (nested) and add channels to the list.
  std::size_t received = 0;
  std::uint64_t received_bytes = 0;
  for (std::size_t i = 0; i < in_list_.size(); ++i) received += in_list_[i]->poll(self, received_bytes);
  ran += received;
  if (received > 0 && received_bytes >= slip_record_bytes * received) slip_behind_senders();
  if (!reads_.empty()) ran += finish_reads();
  // Only messengers that queued something since the last look (not every possible
  // destination). By index: a drain may grow a ring, whose wait polls and may queue more.
  for (std::size_t i = 0; i < with_queue_.size(); ++i) ran += with_queue_[i]->drain();
  std::erase_if(with_queue_, [](messenger* m) {
    if (m->queued_bytes() > 0) return false;
    m->listed_as_queued = false;
    return true;
  });
  return ran;
}

void channels::flush(thread_context&) {
  for (std::size_t i = 0; i < created_.size(); ++i) created_[i]->flush();
}

std::uint32_t channels::acquire_counter_word() {
  if (free_counter_words_.empty()) reclaim_drained_counter_words();
  if (free_counter_words_.empty()) return 0;
  std::uint32_t w = free_counter_words_.back();
  free_counter_words_.pop_back();
  return w;
}

void channels::release_counter_word(std::uint32_t word) noexcept {
  // A synchronizer destroyed with notices still to come (its owner stopped waiting: deadline,
  // shutdown): they decrement this word when they arrive, so it is not handed to the next
  // synchronizer, whose count they would corrupt, until its count reached zero.
  if (std::atomic_ref<std::uint64_t>(feedback_words()[word]).load(std::memory_order_acquire) != 0) {
    draining_counter_words_.push_back(word);
    return;
  }
  free_counter_words_.push_back(word);
}

void channels::reclaim_drained_counter_words() noexcept {
  std::erase_if(draining_counter_words_, [&](std::uint32_t word) {
    if (std::atomic_ref<std::uint64_t>(feedback_words()[word]).load(std::memory_order_acquire) != 0) {
      return false;
    }
    free_counter_words_.push_back(word);
    return true;
  });
}

void channels::note_queued(messenger& m) {
  if (m.listed_as_queued) return;
  m.listed_as_queued = true;
  with_queue_.push_back(&m);
}

void channels::peers_failed(thread_context& self) {
  for (messenger* m : created_) (void)m->check_peer();
  reclaim_pending_ = true;
  reclaim_dead_senders(self);
}

void channels::reclaim_dead_senders(thread_context& self) {
  fabric::runtime& rt = self.rt();
  auto dead = [&](std::uint32_t sender) {
    const int process = rt.process_of_thread(sender);
    return process >= 0 && rt.peer_failed(process);
  };
  bool deferred = false;
  std::erase_if(in_list_, [&](inbound_channel* channel) {
    if (!dead(channel->sender())) return false;
    if (channel->running()) {
      deferred = true;
      return false;
    }
    received_.chunks_reclaimed += channel->chunks();
    in_[channel->sender()].reset();  // frees its chunks (published calls not run are dropped)
    return true;
  });
  for (auto& grant : self.state().take_granted(
           [&](const fabric::granted_memory& g) { return dead(g.sender); })) {
    (void)rt.service_free(reinterpret_cast<std::uint64_t>(grant.memory.data), grant.memory.size);
    ++received_.chunks_reclaimed;
  }
  // A grant still being linked may be a dead sender's too: look again at the next poll.
  reclaim_pending_ = deferred || self.state().grant_in_flight();
}

bool channels::any_failed() {
  bool failed = false;
  for (messenger* m : created_) {
    if (!m->check_peer()) failed = true;
  }
  return failed;
}

namespace detail {
channels* attached_channels(thread_context& self) {
  fabric::runtime& rt = self.rt();
  if (!rt.is_attached_id(self.id()) || !rt.in_run()) return nullptr;
  auto* current = static_cast<channels*>(self.extension(fabric::layer_slot::invoke_channels));
  if (current != nullptr && current->run_epoch() == rt.run_epoch()) return current;
  // The earlier run ended once every record sent in it was consumed: nothing is lost here.
  return static_cast<channels*>(self.renew_layer(fabric::layer_slot::invoke_channels));
}

bool attached_channels_stale(thread_context& self) noexcept {
  const auto* current =
      static_cast<const channels*>(self.extension(fabric::layer_slot::invoke_channels));
  return current != nullptr && current->run_epoch() != self.rt().run_epoch();
}

bool channels_queued(thread_context& self) noexcept {
  const auto* current =
      static_cast<const channels*>(self.extension(fabric::layer_slot::invoke_channels));
  return current != nullptr && current->has_queued();
}

void close_attached_channels(thread_context& self) noexcept {
  if (self.rt().is_attached_id(self.id())) self.drop_layer(fabric::layer_slot::invoke_channels);
}

void throw_no_channels(thread_context& self) {
  if (self.rt().is_attached_id(self.id())) {
    throw error(fmt::format(
        "thread {} is an attached thread (runtime::attach): one-sided channels, synchronizers "
        "and broadcasts need a worker thread of runtime::run; attached threads make send-based "
        "calls (thread_context::call, call_buffer, call_return), and any thread makes one-sided "
        "calls through an offload::engine (engine::call<invoke::channel::write>)",
        self.id()));
  }
  throw error(fmt::format("thread {} has no one-sided channels (service threads do not)",
                          self.id()));
}
}  // namespace detail

std::string describe(thread_context& self, call_status status, channel c) noexcept {
  try {
    if (status != call_status::too_large) return fabric::to_string(status);
    if (c == channel::send) {
      return fmt::format(
          "call larger than SERIEMA_SEND_LIMIT ({} bytes of closure and buffer for a send-based "
          "call), or a put variant's target smaller than its bytes",
          self.rt().options().send_limit);
    }
    // The options of this thread's messengers when it has them (they may have been set), else
    // the environment's, which they start from.
    fabric::thread_extension* ext = self.extension(fabric::layer_slot::invoke_channels);
    const messenger_options& options =
        ext != nullptr ? static_cast<channels*>(ext)->options() : environment_options();
    return fmt::format(
        "call larger than a one-sided record may be ({} bytes with its header: the chunk's data "
        "area, SERIEMA_CHUNK_SIZE={} less {}, and a staging unit for calls to another machine, "
        "SERIEMA_STAGING_SIZE={} less 64), or a put variant's target smaller than its bytes",
        options.max_record(), options.chunk_size, wire::chunk_header_size, options.staging_size);
  } catch (...) {
    return fabric::to_string(status);
  }
}

}  // namespace seriema::invoke
